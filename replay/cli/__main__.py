"""``python -m tasktrail.replay.cli``: the ``tasktrail`` command line, run as a module,
exiting with its exit code (the same as the ``tasktrail`` console script).
"""

import sys

from . import main

sys.exit(main())
