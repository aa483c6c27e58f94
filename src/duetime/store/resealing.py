"""Re-sealing stored values with a ring's first key, one batch at a time, for both backends.

A rotation walks stored rows by id: each payload sealed with another key (or not sealed, in a
namespace that now seals) is sealed with the first key, and so is each last error, attempt
error and traceback. Each value is written only over the value read (the statement names it),
apart from the row's other columns: a worker that writes the row meanwhile (its outcome, its
error, already sealed with the first key) keeps what it wrote and does not stop the payload
being re-sealed. A rotation stopped anywhere resumes from any earlier id, the rows done already
needing no change.
"""

from __future__ import annotations

from typing import Any

from duetime.support.jsontext import load_json
from duetime.support.sealing import Sealing, sealed_token


def resealed_payload(sealing: Sealing, namespace: str, stored: str) -> str | None:
    """A stored payload's JSON text as the first key seals it; None: it needs no change."""
    value = load_json(stored)
    if sealed_token(value) is None:
        return sealing.seal_payload(namespace, stored) if sealing.seals(namespace) else None
    return sealing.reseal_payload_text(value)


def resealed_text(sealing: Sealing, text: str | None) -> str | None:
    """An error or traceback as the first key seals it (plain ones too); None: no change."""
    if text is None:
        return None
    resealed = sealing.reseal_text(text)
    if resealed is not None:
        return resealed
    if sealing.open_text(text) == text:  # plain
        return sealing.seal_error(text)
    return None


def timer_writes(
    sealing: Sealing, rows: list[Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The payload and last-error writes a batch of rows (``id``, ``namespace``, ``payload``
    as JSON text, ``last_error``) needs, each naming the value it replaces."""
    payloads, errors = [], []
    for row in rows:
        payload = resealed_payload(sealing, row["namespace"], row["payload"])
        if payload is not None:
            payloads.append(
                {
                    "id": row["id"],
                    "namespace": row["namespace"],
                    "new": payload,
                    "old": row["payload"],
                }
            )
        error = resealed_text(sealing, row["last_error"])
        if error is not None:
            errors.append(
                {
                    "id": row["id"],
                    "namespace": row["namespace"],
                    "new": error,
                    "old": row["last_error"],
                }
            )
    return payloads, errors


def attempt_writes(sealing: Sealing, rows: list[Any]) -> list[dict[str, Any]]:
    """The error and traceback writes a batch of attempt rows needs (one per column)."""
    writes = []
    for row in rows:
        for column in ("error", "traceback"):
            new = resealed_text(sealing, row[column])
            if new is not None:
                writes.append(
                    {
                        "timer_id": row["timer_id"],
                        "number": row["number"],
                        "column": column,
                        "new": new,
                        "old": row[column],
                    }
                )
    return writes
