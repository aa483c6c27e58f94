"""An owner's outcomes → the arrays of the one-statement ``finish``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.model import (
    Finish,
    Outcome,
)
from duetime.store.postgres.rows import Row
from duetime.support.sealing import Sealing


def _said(values: list[Any], unless: object = None) -> list[Any]:
    """``values``, or nothing when every one is ``unless`` (or empty, for None)."""
    if unless is None:
        return values if any(values) else []
    return values if any(value != unless for value in values) else []


FINISH_OUTCOMES = frozenset(Outcome) - {Outcome.LOST, Outcome.FANNED_OUT}
"""LOST is recorded by rescue, never claimed by an owner; FANNED_OUT by fan_out."""


@dataclass(frozen=True, slots=True)
class FinishBatch:
    """An owner's outcomes as the arrays the one-statement ``finish`` query unnests."""

    finishes: list[Finish]
    repeated: frozenset[int]
    params: Row

    @classmethod
    def of(
        cls, finishes: Sequence[Finish], node_id: str, now: datetime, sealing: Sealing
    ) -> FinishBatch:
        """Order by id (heartbeats lock rows in id order too: no deadlock between them).

        A timer id given twice applies once; the later copies are fenced out (lost), as they
        would be when applied one after another.
        """
        first: dict[int, Finish] = {}
        repeated: set[int] = set()
        for item in finishes:
            if item.outcome not in FINISH_OUTCOMES:
                raise ValueError(f"an owner cannot finish an attempt as {item.outcome.value!r}")
            if item.timer_id in first:
                repeated.add(item.timer_id)
            else:
                first[item.timer_id] = item
        batch = [first[timer_id] for timer_id in sorted(first)]
        # The last three arrays go empty when they would say nothing (every outcome done, no
        # error, no new due time: nearly every batch), and unnest pads them with NULLs: encoding
        # five arrays element by element was a tenth of a busy worker's CPU.
        run_ats = [f.run_at for f in batch]
        seal = sealing.seal_error
        params = {
            "timer_ids": [f.timer_id for f in batch],
            "attempts": [f.attempt for f in batch],
            "outcomes": _said([f.outcome.value for f in batch], unless=Outcome.DONE.value),
            "errors": _said([seal(f.error) for f in batch]),
            "run_ats": [run_at or now for run_at in run_ats] if any(run_ats) else [],
            "tracebacks": _said([seal(f.traceback) for f in batch]),
            "claim_tokens": _said([f.claim_token for f in batch]),
            "started_ats": _said([f.started_at for f in batch]),
            "node_id": node_id,
            "now": now,
        }
        return cls(batch, frozenset(repeated), params)

    @property
    def released(self) -> bool:
        return any(f.outcome is Outcome.RELEASED for f in self.finishes)

    def retried(self) -> list[datetime]:
        """When the retries and snoozes of the batch are due again."""
        return [f.run_at for f in self.finishes if f.run_at is not None]

    def lost(self, applied: Sequence[int] | None) -> set[int]:
        """The outcomes fenced out, from ``finish``'s answer (None: every one applied)."""
        if applied is None:
            return set(self.repeated)
        done = set(applied)
        return {f.timer_id for f in self.finishes if f.timer_id not in done} | self.repeated
