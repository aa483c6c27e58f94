"""One exception per failure, each with a stable ``code`` that the CLI and REST API expose.

Callers branch on ``code`` (and ``field`` for bad input), never on message text.
"""

from __future__ import annotations


class DuetimeError(Exception):
    """Base of every error duetime raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "message": self.message, "field": self.field}


class InvalidInput(DuetimeError):
    """Bad input: the ``field`` names what to fix. Nothing was stored."""

    code = "invalid_input"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)


class UnknownTimezone(InvalidInput):
    code = "unknown_timezone"


class NonexistentLocalTime(InvalidInput):
    """A wall-clock time inside a DST gap while ``disambiguation='reject'``."""

    code = "nonexistent_local_time"


class AmbiguousLocalTime(InvalidInput):
    """A wall-clock time inside a DST overlap while ``disambiguation='reject'``."""

    code = "ambiguous_local_time"


class InvalidCron(InvalidInput):
    code = "invalid_cron"


class InvalidRrule(InvalidInput):
    """An RFC 5545 recurrence rule that is malformed or never fires; the message names the part."""

    code = "invalid_rrule"


class RuleTooCostly(InvalidInput):
    """A recurrence whose occurrences take more work to find than any rule may take (a
    per-second rule that fires on 29 February only, a COUNT walked from long ago): refused,
    naming the ``part`` of the rule at fault, rather than holding the server."""

    code = "rule_too_costly"

    def __init__(self, field: str, part: str, message: str) -> None:
        super().__init__(field, f"{part}: {message}" if part else message)
        self.part = part


class NotFound(DuetimeError):
    code = "not_found"


class UnknownNamespace(NotFound):
    """A namespace nobody created: writes through the CLI and REST never create one by
    accident (a typo would leave timers that no worker serves)."""

    code = "unknown_namespace"

    def __init__(self, namespace: str) -> None:
        super().__init__(
            f"unknown namespace {namespace!r}: create it first (duetime namespaces create)",
            field="namespace",
        )


class Conflict(DuetimeError):
    """The request is well-formed but the stored state forbids it (e.g. cancel after firing)."""

    code = "conflict"


class AlreadyExists(Conflict):
    """``on_conflict='error'`` and the key is taken."""

    code = "already_exists"


class LeaseLost(DuetimeError):
    """The attempt is no longer ours: its lease ran out and another node took it over."""

    code = "lease_lost"


class StoreUnavailable(DuetimeError):
    """The store could not be reached or went away: nothing was written, unless
    :attr:`outcome_unknown` says the connection was lost while the write committed."""

    code = "store_unavailable"
    outcome_unknown = False


class CommitOutcomeUnknown(StoreUnavailable):
    """The connection was lost while the store committed a write: it may have been stored, or
    not, and no one can tell from here. A write made again with the same keys is safe (a key's
    timer is stored once; ``on_conflict='keep'`` or ``'update'`` answers what is there), so
    retrying resolves it; :meth:`~duetime.AsyncApp.get` by key shows which it was."""

    outcome_unknown = True

    def __init__(self, cause: object, *, message: str | None = None) -> None:
        """``message`` says what is known instead, when more is (a bulk action's batches that
        committed before the store went away)."""
        super().__init__(
            message
            or f"the connection to the store was lost while it committed ({cause}): the write "
            "may have been stored or not; retrying with the same keys is safe"
        )


class CapReached(InvalidInput):
    """A tenant already has as many of something as its cap allows (``cap``): one tenant can
    create nothing without bound, so no tenant's listing or claim grows without bound either.
    ``setting`` names the setting that raises the cap."""

    code = "cap_reached"

    def __init__(self, field: str, where: str, what: str, cap: int, setting: str) -> None:
        super().__init__(
            field,
            f"{where} already has {cap} {what}, the most allowed (setting {setting}); "
            "remove some first, or have the operator raise the cap",
        )
        self.cap = cap
        self.setting = setting


class StoreBusy(StoreUnavailable):
    """The database could not take this request in time (every connection busy, or its
    statement ran past the request's timeout): try again shortly. Other requests carry on."""

    code = "store_busy"
