"""Who may act: the token file, and how a request proves it holds a token.

The token file holds lines of ``ACTOR TOKEN`` (blank lines and ``#`` comments are
skipped). A request acts as ``ACTOR`` when it carries ``Authorization: Bearer TOKEN``
(scripts, the API) or the session cookie the sign-in page sets once the token was typed
there (the browser). The actor recorded on every act is the name the file gives the
token, never a value the request sends.

Nothing secret is kept in the clear longer than reading the file: tokens are held as
their HMAC under a key drawn at the server's start (:class:`Tokens`), so a lookup is a
dictionary read of a digest (no comparison that leaks how much of a token matched), and
the cookie holds that digest, not the token: a server started again has a new key, and
every browser signs in again.

Cross-site requests: the cookie is ``HttpOnly`` and ``SameSite=Strict``; a request
authenticated by the cookie must also carry the page's CSRF value (a form field
``csrf`` or the header ``X-CSRF-Token``, an HMAC of the session) and, where the browser
says, come from the console's own origin. A bearer header is never sent by a browser on
its own, so a request that carries one needs neither.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tasktrail.domain import InvalidArgument

COOKIE = "tasktrail_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
MIN_TOKEN = 16
"""The fewest characters a token may have: a guessable one is refused at the start."""
_ACTOR = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")


@dataclass
class Tokens:
    """The tokens of a token file, by their HMAC, each with its actor."""

    actors: dict[str, str] = field(default_factory=dict)
    """Each token's digest (hex) -> its actor."""
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    source: str = ""
    warnings: list[str] = field(default_factory=list)
    """What the server should say at its start (a file others may read)."""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tokens:
        """Read a token file; a missing or unreadable one, a line that is not ``ACTOR
        TOKEN``, a short or repeated token is :class:`InvalidArgument` naming the line."""
        file = Path(path)
        try:
            raw = file.read_text(encoding="utf-8")
            mode = file.stat().st_mode
        except FileNotFoundError:
            raise InvalidArgument(f"--token-file {file}: no such file") from None
        except IsADirectoryError:
            raise InvalidArgument(f"--token-file {file} is a folder, not a file") from None
        except UnicodeDecodeError:
            raise InvalidArgument(f"--token-file {file}: not UTF-8 text") from None
        except OSError as error:
            raise InvalidArgument(f"--token-file {file}: {error.strerror or error}") from None
        tokens = cls(source=str(file))
        for number, line in enumerate(raw.splitlines(), start=1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            where = f"--token-file {file}, line {number}"
            if len(words) != 2:
                raise InvalidArgument(f"{where}: give ACTOR TOKEN (two words), not {len(words)}")
            actor, token = words
            if not _ACTOR.match(actor):
                raise InvalidArgument(f"{where}: the actor name holds a control character")
            if len(token) < MIN_TOKEN:
                raise InvalidArgument(
                    f"{where}: the token of {actor} has {len(token)} characters; give at "
                    f"least {MIN_TOKEN} (e.g. python -c 'import secrets; "
                    "print(secrets.token_urlsafe())')"
                )
            digest = tokens.digest(token)
            if digest in tokens.actors:
                raise InvalidArgument(f"{where}: this token is {tokens.actors[digest]}'s already")
            tokens.actors[digest] = actor
        if not tokens.actors:
            raise InvalidArgument(f"--token-file {file}: no ACTOR TOKEN line in it")
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            tokens.warnings.append(
                f"{file} can be read by other users (chmod 600 {file} keeps its tokens yours)"
            )
        return tokens

    def digest(self, token: str) -> str:
        """The HMAC of a token under this server's key (hex): how it is looked up, and
        what the session cookie holds."""
        return hmac.new(
            self.key, token.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).hexdigest()

    def actor_of_token(self, token: str) -> str | None:
        """The actor a token names, or ``None``."""
        if not token or len(token) > 4_096:
            return None
        return self.actors.get(self.digest(token))

    def actor_of_session(self, session: str) -> str | None:
        """The actor a session cookie's value names, or ``None``."""
        if len(session) != 64:
            return None
        return self.actors.get(session)

    def csrf(self, session: str) -> str:
        """The value a form of this session must carry (an HMAC of the session)."""
        return hmac.new(self.key, b"csrf:" + session.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(self.csrf(session), sent)

    @property
    def names(self) -> list[str]:
        """The actors, once each, in order."""
        return sorted(set(self.actors.values()))


@dataclass(frozen=True)
class Credential:
    """How a request proved who it is: the actor, and by what (``bearer`` or ``cookie``,
    with the session for the CSRF check)."""

    actor: str
    by: str
    session: str = ""


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or ``None``."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def credential(
    tokens: Tokens | None, authorization: str | None, cookie: str | None
) -> Credential | None:
    """Who a request is, by its bearer header, else its session cookie (``None``:
    nobody the token file names)."""
    if tokens is None:
        return None
    token = bearer(authorization)
    if token is not None:
        actor = tokens.actor_of_token(token)
        return Credential(actor, "bearer") if actor is not None else None
    if cookie:
        actor = tokens.actor_of_session(cookie)
        if actor is not None:
            return Credential(actor, "cookie", cookie)
    return None


def same_origin(origin: str | None, fetch_site: str | None, host: str | None, scheme: str) -> bool:
    """Whether a browser says the request comes from the console's own pages: its
    ``Sec-Fetch-Site`` is not cross-site, and its ``Origin`` (where sent) is ours."""
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    if origin is None:
        return True  # not a browser that says; the CSRF value still has to match
    return host is not None and origin == f"{scheme}://{host}"
