"""History kept for years (the Retention issue): finished task trees archived to
segment files or pruned, with the proofs of what left (:mod:`.events`,
:mod:`.archiving`), read back in place (:mod:`.across`), values erased with the proofs
kept (:mod:`.erasure`), a retention policy and periodic seals run by workers."""

from . import events as events  # registers the history acts' events
