"""POSTing a JSON document to a user's webhook (``assay drift --notify``, scheduled drift readings).

A webhook's path often holds its secret (a chat service's incoming-hook
token), so what is said of one names its scheme, host and port only.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from .errors import UsageError

#: How long a webhook may take to answer (connect, and each read or write).
NOTIFY_TIMEOUT_S = 10.0


def check_url(url: str, flag: str = "--notify") -> str:
    """``url`` if it is an http(s) URL with a host; else a ``UsageError`` (before anything runs)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here, not at the POST
    except ValueError:
        raise UsageError(f"{flag}: not a URL (give http://… or https://…)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag}: give an http:// or https:// URL with a host")
    return url


def where(url: str) -> str:
    """What may be said of a webhook: its scheme, host and port, never its path or a password."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def post_json(url: str, document: dict[str, Any]) -> str | None:
    """POST ``document`` to ``url``; None when it was taken, else why not (never raises)."""
    import httpx

    body = json.dumps(document, ensure_ascii=False).encode("utf-8")
    try:
        reply = httpx.post(url, content=body, timeout=NOTIFY_TIMEOUT_S,
                           headers={"Content-Type": "application/json"})
    except httpx.TimeoutException:
        return f"no answer within {NOTIFY_TIMEOUT_S:g} s"
    except (httpx.HTTPError, httpx.InvalidURL, ValueError, OSError) as error:
        return f"cannot reach it ({type(error).__name__})"
    if not reply.is_success:
        return f"it answered HTTP {reply.status_code}"
    return None
