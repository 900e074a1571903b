"""``tasktrail serve``: the console under uvicorn, safe by default.

It binds 127.0.0.1 unless told otherwise and says where it listens and who can reach it;
a store that cannot be opened, a token file that cannot be read, an archive folder that
is not one, an address that is not this machine's or a port in use is bad input (exit
2, named) before anything is served: the socket is bound here, before uvicorn starts.
SIGTERM and SIGINT stop it within a second: uvicorn stops accepting, gives open
responses (the live pages' event streams) :data:`GRACE_S` to end, then the follower
stops and the store closes. SIGTERM exits 0; SIGINT is an interruption (130), as for
every command.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tasktrail.domain import InvalidArgument

from .app import console_for, create_app
from .web import Console

GRACE_S = 0.2
"""How long open responses get to end at a stop before they are cancelled."""
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``port`` 0: any free one), or
    :class:`InvalidArgument` saying why not."""
    if not 0 <= port <= 65_535:
        raise InvalidArgument(f"--port {port}: give 0 to 65535")
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise InvalidArgument(f"--host {host}: not an address ({error.strerror})") from None
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not a live listener's
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise InvalidArgument(
                f"--port {port}: in use on {host} (another server, or another tasktrail "
                "serve): give another --port"
            ) from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise InvalidArgument(f"--host {host}: not an address of this machine") from None
        if error.errno == errno.EACCES:
            raise InvalidArgument(
                f"--port {port}: needs privileges here; give one above 1023"
            ) from None
        raise InvalidArgument(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    location: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token_file: str | None = None,
    archive: str | os.PathLike[str] | None = None,
    say: Callable[[str], None] | None = None,
    end_process: bool = False,
) -> int:
    """Serve the console of the store at ``location`` (read across the archive folder
    ``archive``, if given) until SIGTERM or SIGINT; returns the exit code (0 after
    SIGTERM). ``end_process``: once stopped, end the process at
    once (``tasktrail serve``): what the console folded (some 130 MB for 100,000 tasks)
    is not freed object by object, which took an interpreter's exit 1.3-2 s here."""
    import uvicorn

    tell = say or _say
    # A bad store, token file or archive folder: exit 2.
    console = console_for(location, token_file, archive=archive)
    try:
        sock = bind(host, port)
    except BaseException:
        console.follower.close()
        raise
    config = uvicorn.Config(
        create_app(console),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACE_S,  # type: ignore[arg-type]  # a float works
    )
    server = _Server(config, console)
    # Our handlers from before uvicorn takes the signals (a signal then still stops it)
    # to after it gives them back and raises again the one that stopped it: SIGTERM is a
    # stop asked for (0), SIGINT an interruption (130), whatever the moment it came.
    stops: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stops.append(signum)
        server.handle_exit(signum, frame)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for line in [*_opening(console, host, url_of(sock)), *_archive_lines(console)]:
            tell(line)
        _tell_when_ready(console, tell)
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        if console.follower.started is False:
            console.follower.close()
    tell("tasktrail console: stopped")
    code = 130 if signal.SIGINT in stops else 0
    if end_process:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the store is closed and the streams ended: nothing is left to do
    return code


class _Server:
    """uvicorn's server, whose stop also ends the live pages' event streams at once
    (uvicorn would give them the grace period, then cancel them)."""

    def __new__(cls, config: Any, console: Console) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                super().handle_exit(sig, frame)
                console.follower.hang_up()

        return Server(config)


def _opening(console: Console, host: str, url: str) -> list[str]:
    lines = [f"tasktrail console: {url} serving {console.store_name}"]
    if host in LOOPBACK:
        lines.append(
            f"  listening on {host} only: this machine alone can reach it "
            "(--host 0.0.0.0 opens it to others)"
        )
    else:
        lines.append(
            f"  listening on {host}: anyone who reaches this machine can read the store"
            + ("; tokens cross the network in clear: put TLS in front" if console.tokens else "")
        )
    tokens = console.tokens
    if tokens is None:
        lines.append(
            "  acts: off (start with --token-file FILE to abort, retry, fork, send, submit)"
        )
    else:
        names = ", ".join(tokens.names[:5]) + (", ..." if len(tokens.names) > 5 else "")
        lines.append(
            f"  acts: on for {len(tokens.names)} actor{'s' if len(tokens.names) != 1 else ''}"
            f" ({names}): sign in at {url}login with a token of {tokens.source}"
        )
        lines += [f"  warning: {w}" for w in tokens.warnings]
    return lines


def _archive_lines(console: Console) -> list[str]:
    archived = console.follower.archived
    if archived.folder is not None:
        return [f"  archive: read across {archived.folder}, each segment checked"]
    return [f"  note: {archived.skipped}"] if archived.skipped else []


def _tell_when_ready(console: Console, tell: Callable[[str], None]) -> None:
    began = time.monotonic()

    def wait() -> None:
        follower = console.follower
        said = None
        while not follower.ready.wait(0.5):
            failure = follower.failure
            if failure is not None and failure != said:
                tell(f"tasktrail console: cannot read the store (trying again): {failure}")
                said = failure
        status = follower.status()
        tell(
            f"tasktrail console: read {status['position']:,} positions ({status['tasks']:,} "
            f"tasks) in {time.monotonic() - began:.1f} s; following the store's news"
        )
        for finding in console.follower.archived.findings():
            tell(f"  warning: {finding}")

    threading.Thread(target=wait, name="tasktrail-console-ready", daemon=True).start()


def _say(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()
