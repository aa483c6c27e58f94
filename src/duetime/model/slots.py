"""Deprecated name: the fast constructors of the busy paths' records are
:mod:`duetime.model.fast_records` (the worker's slots are :mod:`duetime.worker.slots`).
Importing this module warns."""

from __future__ import annotations

import warnings

from duetime.model.fast_records import (
    make_done,
    make_new_timer,
    make_put_result,
    make_timer,
    set_claim_token,
    set_fired_at,
    shell_of,
    slot_setter,
)

warnings.warn(
    "duetime.model.slots is deprecated: import duetime.model.fast_records",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "make_done",
    "make_new_timer",
    "make_put_result",
    "make_timer",
    "set_claim_token",
    "set_fired_at",
    "shell_of",
    "slot_setter",
]
