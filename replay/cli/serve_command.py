"""``tasktrail serve STORE [--host 127.0.0.1] [--port 8765] [--token-file F] [--archive
DIR]``: the
live console (:mod:`tasktrail.replay.console`, docs/console.md), in a browser and as a
JSON API. It needs the ``console`` extra (Starlette and uvicorn), imported only here,
when the command runs: every other command starts without them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tasktrail.domain import InvalidArgument

from .common import EXIT_OK, STORE_HELP, say
from .retention_commands import ARCHIVE_HELP

DESCRIPTION = """\
Serve a live console of STORE: the task list (filters, search, pages), each
task's page (the report's timeline of its tree, its history with the rule,
actor and reason behind each event, memos, result, messages, streamed output,
children and owner), the workers, the run ledger, the schedules and the inbox
of open asks. Pages update within a second of an event appended by any
process, without a reload. The store is only read, except for acts.

Acts (abort, retry, fork, send, submit, answer an ask) appear only with
--token-file, whose lines are ACTOR TOKEN: a request carries Authorization:
Bearer TOKEN (or signs in at /login once); the actor recorded is the name the
file gives the token. The console binds 127.0.0.1 unless --host says
otherwise. SIGTERM stops it within a second. A JSON API lives under /api/
(docs/console.md).

With --archive DIR, the history tasktrail archive moved to DIR reads as if
still in place: archived tasks are listed and found with the finished ones,
and their pages show their history; a segment that fails its check (missing,
altered) is named on every page and its events left out. Without it, every
page says which archived ranges it skips.

examples:
  tasktrail serve trail.db                                  http://127.0.0.1:8765/
  tasktrail serve trail.db --token-file ~/.tasktrail-tokens --port 9000
  tasktrail serve trail.db --archive archive/               archived history too
  curl -H "Authorization: Bearer $TOKEN" -d '{"reason": "stuck"}' \\
       -H 'Content-Type: application/json' http://127.0.0.1:8765/api/tasks/T/abort
"""


def add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="a live console of a store in a browser, and a JSON API (acts behind a token)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("store", help=STORE_HELP)
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=int, default=8765, help="the port (default 8765; 0: any free one)"
    )
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="lines of ACTOR TOKEN: who may act (default: no acts, the console only reads)",
    )
    serve.add_argument("--archive", type=Path, metavar="DIR", default=None, help=ARCHIVE_HELP)


def do_serve(args: argparse.Namespace) -> int:
    try:
        from tasktrail.replay.console.server import serve
    except ImportError as error:
        raise InvalidArgument(
            f"tasktrail serve needs the console extra ({error.name} is missing): "
            "pip install 'tasktrail[console]'"
        ) from None
    code = serve(
        args.store,
        host=args.host,
        port=args.port,
        token_file=args.token_file,
        archive=args.archive,
        say=say,
        end_process=True,
    )
    return code if code else EXIT_OK
