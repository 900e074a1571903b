"""What every route of the console shares: the console itself (its follower, its tokens),
responses with the pages' security headers, who a request is, the checks an act passes
(401 without a token, 403 for a cross-site or CSRF-less cookie request), a request's
body as a form or JSON, and a task id out of a percent-encoded path."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from tasktrail.domain import (
    ConflictError,
    InvalidArgument,
    Refused,
    RuleViolation,
    StoreError,
    TasktrailError,
    UnknownTask,
)

from .html.layout import SECURITY_HEADERS, Viewer, problems_note
from .model.follow import Follower
from .tokens import COOKIE, CSRF_FIELD, CSRF_HEADER, Credential, Tokens, credential, same_origin

MAX_BODY = 1 << 20
"""The largest act a request may carry (1 MiB; a memo or a message is at most 64 KiB)."""
T = TypeVar("T")


@dataclass
class Console:
    """The served console: its follower, its tokens (``None``: acts are off), the store
    as the pages name it (no password), and where acts open it."""

    follower: Follower
    tokens: Tokens | None
    store_name: str
    location: str

    def viewer(self, request: Request) -> Viewer:
        """Who looks at a page, and the CSRF value its forms carry."""
        found = self.credential(request)
        csrf = ""
        if found is not None and found.by == "cookie" and self.tokens is not None:
            csrf = self.tokens.csrf(found.session)
        return Viewer(found.actor if found else None, self.tokens is not None, csrf)

    def credential(self, request: Request) -> Credential | None:
        return credential(
            self.tokens, request.headers.get("authorization"), request.cookies.get(COOKIE)
        )

    def notes(self) -> str:
        return problems_note(self.follower.status())

    async def read(self, call: Callable[[], T]) -> T:
        """Run a read of the follower (it holds the lock) off the event loop."""
        return await asyncio.to_thread(call)


def html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(body, status, headers={**SECURITY_HEADERS, **(headers or {})})


def answer(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer (orjson; a value it cannot encode as its text)."""
    return Response(
        orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS),
        status,
        headers={
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            **(headers or {}),
        },
        media_type="application/json",
    )


def params(request: Request) -> dict[str, str]:
    """The query's parameters, the last value of each."""
    return {key: request.query_params[key] for key in request.query_params}


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def refusal(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and body an act's refusal is answered with: it names the rule."""
    said: dict[str, Any] = {"error": str(error)}
    if isinstance(error, RuleViolation):
        said["rule"] = error.rule
        return 409, said
    if isinstance(error, UnknownTask):
        return 404, said
    if isinstance(error, ConflictError):
        return 409, said
    if isinstance(error, StoreError):
        return 503, said
    if isinstance(error, InvalidArgument | Refused | TasktrailError):
        return 400, said
    raise error


async def body_fields(request: Request) -> tuple[dict[str, Any], bool]:
    """The act's fields: a JSON object (``typed``) or an urlencoded form; a body over
    :data:`MAX_BODY` or one that is neither is :class:`InvalidArgument`."""
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise InvalidArgument(f"the request is over {MAX_BODY} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        if not raw.strip():
            return {}, True
        try:
            fields = json.loads(raw)  # exact integers, unlike orjson past 64 bits
        except (ValueError, RecursionError):
            raise InvalidArgument("the body is not JSON") from None
        if not isinstance(fields, dict):
            raise InvalidArgument("the body must be a JSON object of the act's fields")
        return fields, True
    if kind in ("", "application/x-www-form-urlencoded"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument("the form is not UTF-8") from None
        return dict(parse_qsl(text, keep_blank_values=True)), False
    raise InvalidArgument(f"send JSON or a form, not {kind}")


def check_act(console: Console, request: Request, fields: dict[str, Any]) -> Credential:
    """Who acts, or :class:`Denied`: 403 when acts are off or a cookie request fails the
    cross-site checks, 401 without a token the file names."""
    if console.tokens is None:
        raise Denied(403, "acts are off: the console was started without --token-file")
    found = console.credential(request)
    if found is None:
        raise Denied(401, "acts need a token: Authorization: Bearer TOKEN, or sign in")
    if found.by == "cookie":
        scheme = request.url.scheme
        origin_ok = same_origin(
            request.headers.get("origin"),
            request.headers.get("sec-fetch-site"),
            request.headers.get("host"),
            scheme,
        )
        sent = request.headers.get(CSRF_HEADER) or _text(fields.get(CSRF_FIELD))
        if not origin_ok or not console.tokens.csrf_ok(found.session, sent):
            raise Denied(403, "refused: a cross-site request, or a form without its CSRF value")
    return found


class Denied(Exception):
    """An act refused before it reached the scheduler: nothing was appended."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def headers(self) -> dict[str, str]:
        """A 401 says how to authenticate."""
        if self.status != 401:
            return {}
        return {"WWW-Authenticate": 'Bearer realm="tasktrail console"'}

    def response(self) -> Response:
        return answer({"error": str(self)}, self.status, self.headers)


def task_path(request: Request, prefix: str) -> tuple[str, str] | None:
    """``(task id, the rest)`` of a path ``PREFIX<id>[/<rest>]``, the id percent-decoded
    from the raw path (an id may hold ``/``: links encode it as ``%2F``)."""
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) and raw else request.url.path
    path = path.split("?", 1)[0]
    if not path.startswith(prefix):
        return None
    segment, _, rest = path[len(prefix) :].partition("/")
    task_id = unquote(segment, errors="surrogateescape")
    if not task_id:
        return None
    return task_id, rest


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
