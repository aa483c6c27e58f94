"""Flow control rules: limits and pauses per event type or glob, kept in the database.

Every node reads the same rows, so a rule holds across all of them and changes without a
restart. One row per ``(namespace, pattern)`` carries a limit (``concurrency``, ``rate`` with its
``burst``, ``partition_by``), a pause, or both.

Which rule governs a type: a pause matching it always holds it back; of the limits matching it,
the most specific one governs alone (an exact type before any glob, then the glob with the
most literal characters, then by text), so ``email.welcome`` may have a limit of its own inside
``email.*``'s.

A destination's rate (``rate="100/s"`` on a webhook or broker destination) is a row too, keyed
``@<destination>`` (a key no type pattern can take) with its ``destination`` set: it governs the
delivery rows to that destination alone, whatever their type, so the destination receives at
most its rate whatever the routes and the type rules; a pause of a type still holds them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from duetime.errors import InvalidInput
from duetime.model import JSON, Claimed, iso
from duetime.timemath.ratelimit import Rate, check_burst, default_burst

MAX_CONCURRENCY = 1_000_000
DESTINATION_PREFIX = "@"
"""Before a destination's name in the key of its rule: no type pattern holds it."""
_PATTERN = re.compile(r"[A-Za-z0-9_.:*\-/]{1,200}")
_PAYLOAD_FIELD = re.compile(r"payload\.([A-Za-z0-9_\-]{1,100})")


@dataclass(frozen=True, slots=True)
class FlowRule:
    """One row of flow control: a limit on the types ``pattern`` matches, a pause, or both."""

    namespace: str
    pattern: str
    concurrency: int | None = None
    rate: Rate | None = None
    burst: int | None = None
    partition_by: str | None = None
    paused: bool = False
    updated_at: datetime | None = None
    destination: str | None = None
    """A destination's rule: it governs the deliveries to this destination (not types)."""

    @property
    def limits(self) -> bool:
        """Whether the row limits anything (else it is only a pause)."""
        return self.concurrency is not None or self.rate is not None

    @property
    def effective_burst(self) -> int:
        if self.rate is None:
            return 0
        return self.burst if self.burst is not None else default_burst(self.rate)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "namespace": self.namespace,
            "pattern": self.pattern,
            "concurrency": self.concurrency,
            "rate": None if self.rate is None else str(self.rate),
            "burst": self.effective_burst if self.rate is not None else None,
            "partition_by": self.partition_by,
            "paused": self.paused,
            "destination": self.destination,
            "updated_at": iso(self.updated_at) if self.updated_at else None,
        }


@dataclass(frozen=True, slots=True)
class FlowStatus:
    """A rule with what it holds now: attempts running, due timers waiting, the oldest's due."""

    rule: FlowRule
    running: int
    held: int
    oldest_held_at: datetime | None

    def to_dict(self, now: datetime) -> dict[str, JSON]:
        oldest = self.oldest_held_at
        return {
            **self.rule.to_dict(),
            "running": self.running,
            "held": self.held,
            "oldest_held_at": iso(oldest) if oldest else None,
            "oldest_held_seconds": (
                round(max(0.0, (now - oldest).total_seconds()), 3) if oldest else None
            ),
        }


@dataclass(frozen=True, slots=True)
class Governed:
    """A limit as a claim applies it: its rule, and the patterns of the more specific limits
    that take their types away from it (``shadows``)."""

    rule: FlowRule
    shadows: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RuleFilter:
    """Which rows a rule's claim or count takes: types matching ``only`` and none of
    ``excluded``; of the deliveries, those to ``destination`` only (when set) and none to one of
    ``destinations`` (the destinations with rules of their own)."""

    only: str
    excluded: tuple[str, ...]
    destination: str | None = None
    destinations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FlowPlan:
    """A namespace's rules as a claim applies them (see :func:`plan_of`)."""

    limits: tuple[Governed, ...] = ()
    paused: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """No rule: the claim is today's plain one."""
        return not self.limits and not self.paused

    @property
    def rated(self) -> bool:
        """Some limit has a rate."""
        return any(g.rule.rate is not None for g in self.limits)

    @property
    def governed(self) -> tuple[str, ...]:
        """Every type pattern a rule holds: the plain claim leaves these types alone."""
        types = tuple(g.rule.pattern for g in self.limits if g.rule.destination is None)
        return types + self.paused

    @property
    def destinations(self) -> tuple[str, ...]:
        """The destinations with rules: their deliveries are theirs alone."""
        return tuple(g.rule.destination for g in self.limits if g.rule.destination is not None)

    def ungoverned(self) -> RuleFilter:
        """What the claim of the rows no rule governs takes."""
        return RuleFilter("*", self.governed, None, self.destinations)

    def filter_of(self, governed: Governed) -> RuleFilter:
        """What a limit's claim takes (paused types left alone)."""
        return self._filter(governed.rule, governed.shadows + self.paused)

    def counted_by(self, rule: FlowRule) -> RuleFilter:
        """What a rule counts as running and held (paused types included)."""
        return self._filter(rule, self.shadows_of(rule.pattern))

    def _filter(self, rule: FlowRule, excluded: tuple[str, ...]) -> RuleFilter:
        if rule.destination is not None:
            return RuleFilter("*", tuple(p for p in excluded if p in self.paused), rule.destination)
        return RuleFilter(rule.pattern, excluded, None, self.destinations)

    def shadows_of(self, pattern: str) -> tuple[str, ...]:
        """The more specific limits' patterns, which take types away from ``pattern``'s."""
        for governed in self.limits:
            if governed.rule.pattern == pattern:
                return governed.shadows
        return ()


@dataclass(frozen=True, slots=True)
class RuledClaim:
    """What a claim under rules brought, and when a rule that held rows back may allow more
    (None: no rule held anything back)."""

    claimed: list[Claimed] = field(default_factory=list)
    retry_at: datetime | None = None
    held: tuple[str, ...] = ()
    ungoverned_short: bool = False
    """The claim of the types no rule governs came back short: none of them is due now."""
    granted_at: dict[int, datetime] = field(default_factory=dict)
    """Rows a rate granted (by timer id): the instant a worker's pacing of each counts from, on
    the database's clock — the grant's, earlier by how far the rate was from its bound
    (``store.limits.slack``)."""


def specificity(pattern: str) -> tuple[int, int, str]:
    """Sort key, most specific first: exact types, then globs with more literal characters."""
    return (1 if "*" in pattern else 0, -len(pattern.replace("*", "")), pattern)


def plan_of(rules: Sequence[FlowRule]) -> FlowPlan:
    """Order the limits most specific first, each shadowed by those before it; the rules of
    destinations come first and shadow none (they take deliveries, not types)."""
    limits = sorted(
        (r for r in rules if r.limits and r.destination is None),
        key=lambda r: specificity(r.pattern),
    )
    destinations = sorted(
        (r for r in rules if r.limits and r.destination is not None), key=lambda r: r.pattern
    )
    governed = tuple(Governed(rule, ()) for rule in destinations) + tuple(
        Governed(rule, tuple(r.pattern for r in limits[:i])) for i, rule in enumerate(limits)
    )
    paused = tuple(sorted(r.pattern for r in rules if r.paused))
    return FlowPlan(governed, paused)


def glob_match(parts: Sequence[str], text: str) -> bool:
    """Whether ``text`` matches the glob split at its ``*`` into ``parts``, as the stores match
    (``*``: any run of characters, case counts)."""
    if len(parts) == 1:
        return text == parts[0]
    first, last = parts[0], parts[-1]
    end = len(text) - len(last)
    if end < len(first) or not text.startswith(first) or not text.endswith(last):
        return False
    at = len(first)
    for part in parts[1:-1]:
        found = text.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True


def check_pattern(pattern: object, field: str = "pattern") -> str:
    """An event type or a glob of them (``*`` matches any run of characters)."""
    if not isinstance(pattern, str) or not _PATTERN.fullmatch(pattern):
        raise InvalidInput(
            field,
            f"{pattern!r} is not an event type or glob (letters, digits, '_.:-/' and '*', "
            "at most 200 characters)",
        )
    return pattern


def check_concurrency(value: object, field: str = "concurrency") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"{value!r} is not a whole number of attempts")
    if not 1 <= value <= MAX_CONCURRENCY:
        raise InvalidInput(field, f"{value} must be between 1 and {MAX_CONCURRENCY}")
    return value


def check_partition(value: object, field: str = "partition_by") -> str:
    """``subject``, or ``payload.<field>`` (a top-level field of the payload)."""
    if value == "subject" or (isinstance(value, str) and _PAYLOAD_FIELD.fullmatch(value)):
        return value
    raise InvalidInput(
        field, f"{value!r}: partition by 'subject' or a payload field, e.g. 'payload.user_id'"
    )


def partition_field(partition_by: str | None) -> str | None:
    """The payload field a partition reads (None: none, or the subject)."""
    if partition_by is None or partition_by == "subject":
        return None
    match = _PAYLOAD_FIELD.fullmatch(partition_by)
    return match[1] if match else None


def new_rule(
    namespace: str,
    pattern: str,
    *,
    concurrency: int | None,
    rate: Rate | None,
    burst: int | None,
    partition_by: str | None,
) -> FlowRule:
    """A limit from checked parts; InvalidInput naming the field for what does not fit."""
    check_pattern(pattern)
    if burst is not None:
        check_burst(burst)
        if rate is None:
            raise InvalidInput("burst", "a burst only applies to a rate: give a rate too")
    if concurrency is None and rate is None:
        raise InvalidInput("concurrency", "a limit needs a concurrency, a rate, or both")
    if concurrency is not None:
        check_concurrency(concurrency)
    if partition_by is not None:
        check_partition(partition_by)
        if concurrency is None:
            raise InvalidInput(
                "partition_by", "a partition applies to a concurrency: give a concurrency too"
            )
    return FlowRule(namespace, pattern, concurrency, rate, burst, partition_by)


def destination_key(destination: str) -> str:
    """The key (``pattern`` column) of a destination's rule."""
    return DESTINATION_PREFIX + destination


def destination_rule(namespace: str, destination: str, rate: Rate, burst: int | None) -> FlowRule:
    """The rule of a destination's rate: it governs the deliveries to it."""
    if burst is not None:
        check_burst(burst)
    return FlowRule(
        namespace, destination_key(destination), rate=rate, burst=burst, destination=destination
    )
