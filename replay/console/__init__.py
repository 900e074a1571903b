"""A live console of a store: ``tasktrail serve STORE`` (docs/console.md).

The store in a browser, updating as it happens: the task list (filters, search, pages),
a task's page (the report's timeline of its tree, its history with the rule, actor and
reason behind each event, memos, result, messages, children and owner), the workers,
the run ledger and the schedules; and the same reads as a JSON API under ``/api/``,
with the store's news as server-sent events at ``/api/stream``. With a token file, an
operator acts (abort, retry, fork, send, submit) as the actor the file names.

Three rooms: :mod:`.model` (what it reads: the store folded and kept current from its
news, the list, a task's page, the fleet's), :mod:`.html` (how it draws them: every
recorded string escaped, the report's timeline, one style sheet and one script) and
this package, the server: :mod:`.tokens` (who may act), :mod:`.acts` (the scheduler's
commands), :mod:`.web`, :mod:`.pages`, :mod:`.api` and :mod:`.app` (the Starlette
application), :mod:`.server` (uvicorn, ``tasktrail serve``).

Needs the ``console`` extra (Starlette, uvicorn). Nothing else of tasktrail imports
this package but ``tasktrail serve``, when it runs.
"""

from __future__ import annotations

__all__: list[str] = []
