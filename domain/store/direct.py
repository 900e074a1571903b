"""One direct connection to a PostgreSQL store's server, outside the store's pool, from
the settings its location parsed (:mod:`.location`): for what must not share the
pool's connections (a writer's liveness lock), or runs before there is one (a missing
schema made at open, the cause of a failed open)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def direct_connection(
    env: Mapping[str, str],
    *,
    autocommit: bool = True,
    application_name: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """A new psycopg connection to the server ``env`` names (the caller closes it);
    ``options``: more connection parameters of libpq's (keepalives, say)."""
    import psycopg  # the driver: PostgreSQL stores only

    try:
        timeout = max(1, int(float(env.get("POSTGRES_CONNECT_TIMEOUT", "5") or 5)))
    except ValueError:
        timeout = 5
    extra: dict[str, Any] = dict(options or {})
    if application_name:
        extra["application_name"] = application_name
    return psycopg.connect(
        dbname=env.get("POSTGRES_DBNAME"),
        host=env.get("POSTGRES_HOST"),
        port=env.get("POSTGRES_PORT"),
        user=env.get("POSTGRES_USER"),
        password=env.get("POSTGRES_PASSWORD") or None,
        connect_timeout=timeout,
        autocommit=autocommit,
        **extra,
    )
