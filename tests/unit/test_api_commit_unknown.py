"""A REST 503 says when the write it answers may have been stored."""

from __future__ import annotations

import asyncio
import json

from duetime.api.errors import _duetime_error
from duetime.errors import CommitOutcomeUnknown, StoreUnavailable


def _body(exc: Exception) -> tuple[int, dict[str, object]]:
    response = asyncio.run(_duetime_error(None, exc))  # type: ignore[arg-type]
    return response.status_code, json.loads(bytes(response.body))


def test_a_commit_whose_outcome_is_unknown_says_so_in_its_503() -> None:
    status, body = _body(CommitOutcomeUnknown("server closed the connection"))
    assert status == 503
    assert body["code"] == "store_unavailable"
    assert body["outcome_unknown"] is True
    assert "retrying with the same keys is safe" in str(body["message"])


def test_an_outage_before_any_commit_does_not() -> None:
    status, body = _body(StoreUnavailable("PostgreSQL is unavailable: refused"))
    assert status == 503
    assert "outcome_unknown" not in body
