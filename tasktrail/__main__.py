"""``python -m tasktrail``: the ``tasktrail`` command line, run as a module, exiting
with its exit code (the same as the ``tasktrail`` console script)."""

import sys

from tasktrail.replay.cli import main

sys.exit(main())
