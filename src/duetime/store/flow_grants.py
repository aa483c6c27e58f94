"""What both stores share of flow control: rows to rules, and how much a limit grants a claim.

A claim under rules (``store.limits.claim``) takes, for each limit, at most what the limit
allows, in a transaction that holds the limit's row (PostgreSQL: ``FOR UPDATE``; SQLite: its
write lock), then the types no rule governs as the plain claim would. The arithmetic is here,
once; the SQL is in each backend's ``limits.sql``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from duetime.errors import CapReached
from duetime.model import Claimed, ClaimFilter, Page
from duetime.model.flow_rules import (
    FlowPlan,
    FlowRule,
    FlowStatus,
    Governed,
    RuledClaim,
    RuleFilter,
    glob_match,
    partition_field,
    specificity,
)
from duetime.store.cursors import decode_pattern_cursor, encode_pattern_cursor
from duetime.timemath.ratelimit import (
    Mark,
    Rate,
    RateState,
    allowance,
    default_burst,
    next_allowed,
    pace_slack,
    rotate,
    spend,
    spend_state,
)

CONCURRENCY_POLL = timedelta(milliseconds=50)
"""When a concurrency limit is full, how soon its claim is tried again: a finish on another
node sends no wake-up, so the claim looks again at this pace while rows are held back."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What a limit allows one claim: ``rows`` now; when it allows none or fewer than asked, the
    instant to try again (``retry_at``)."""

    rows: int
    retry_at: datetime | None
    rate: Rate | None
    burst: int
    state: RateState
    """The rate's state before the grant, its marks moved on to the grant's instant."""
    at: datetime
    """The instant of the grant, on the database's clock."""


def rate_of(row: Mapping[str, Any]) -> Rate | None:
    count, period_us = row["rate_count"], row["rate_period_us"]
    if count is None or period_us is None:
        return None
    return Rate(int(count), timedelta(microseconds=int(period_us)))


def rate_state(row: Mapping[str, Any], instant: Callable[[Any], datetime]) -> RateState:
    """A limit row's rate state; ``instant`` decodes the backend's instants. The marks hold only
    while the TAT is the one they were counted up to (``marks_tat``): a TAT written without
    them (a version that did not keep them) means grants they did not count, so they are
    dropped, as in a row written before they were kept."""
    tat = None if row["tat"] is None else instant(row["tat"])
    marks_tat = None if row.get("marks_tat") is None else instant(row["marks_tat"])
    if row.get("recent_at") is None or row.get("recent_count") is None or marks_tat != tat:
        return RateState(tat)

    def mark(prefix: str) -> Mark | None:
        count = row[f"{prefix}_count"]
        if count is None:
            return None
        at = row[f"{prefix}_tat"]
        return Mark(None if at is None else instant(at), int(count))

    return RateState(tat, instant(row["recent_at"]), mark("recent"), mark("earlier"))


def state_params(state: RateState, encode: Callable[[datetime], Any]) -> dict[str, Any]:
    """The parameters of ``spend_tokens`` for a rate's new state."""

    def enc(at: datetime | None) -> Any:
        return None if at is None else encode(at)

    recent, earlier = state.recent, state.earlier
    return {
        "tat": enc(state.tat),
        "recent_at": enc(state.recent_at),
        "recent_tat": None if recent is None else enc(recent.tat),
        "recent_count": None if recent is None else recent.count,
        "earlier_tat": None if earlier is None else enc(earlier.tat),
        "earlier_count": None if earlier is None else earlier.count,
    }


def grant(
    row: Mapping[str, Any],
    state: RateState,
    running: int,
    want: int,
    now: datetime,
) -> Grant:
    """How many of ``want`` rows a limit's row (its rate's state decoded: :func:`rate_state`)
    allows at ``now`` (the database's clock), with ``running`` attempts of its types under
    way."""
    rate = rate_of(row)
    tat = state.tat
    burst = 0
    rows = want
    retry_at: datetime | None = None
    concurrency = row["concurrency"]
    if concurrency is not None and row["partition_by"] is None:  # else per key, in the claim
        free = max(0, int(concurrency) - running)
        if free < rows:
            rows, retry_at = free, now + CONCURRENCY_POLL
    if rate is not None:
        burst = int(row["burst"]) if row["burst"] is not None else default_burst(rate)
        tokens = allowance(rate, burst, tat, now)
        if tokens < rows:
            rows = tokens
            after = spend(rate, tat, now, tokens)
            retry_at = max(retry_at or now, next_allowed(rate, burst, after, now))
    if rate is not None:
        state = rotate(state, now)
    return Grant(rows, retry_at, rate, burst, state, now)


PARTITION_SCAN = 2000
"""A partitioned limit's claim ranks at least this many of the oldest due rows (20 per row it
may take, if more) by partition key: see ``claim_partitioned`` in claims.sql."""


def partition_params(row: Mapping[str, Any], rows: int) -> dict[str, Any]:
    """The extra parameters of ``claim_partitioned`` for a limit's row."""
    return {
        "field": partition_field(row["partition_by"]),
        "concurrency": row["concurrency"],
        "scan": max(PARTITION_SCAN, 20 * rows),
    }


def partitions_full(granted: Grant, claimed: int, now: datetime) -> Grant:
    """A partitioned claim took fewer rows than granted while due rows are left: every key
    they belong to is at its concurrency, so the limit holds them back (and looks again)."""
    return replace(granted, rows=claimed, retry_at=now + CONCURRENCY_POLL)


MAX_SLACK = timedelta(seconds=1)
"""The most :func:`slack` moves a grant back: more than any pacing a worker adds to it."""


def slack(granted: Grant, starts: int) -> timedelta:
    """How far a rate is from its bound after ``starts`` rows of ``granted``: the span by which
    each of them may start earlier than a worker's pacing after the grant, and the rate still
    holds whatever the lag between grant and start (up to that pacing). The rate's recent
    grants tell (see :func:`duetime.timemath.ratelimit.pace_slack` for why it holds): a rate
    far from its bound adds no wait; one at its bound adds the whole pacing."""
    rate = granted.rate
    if rate is None:
        return MAX_SLACK
    return pace_slack(rate, granted.burst, granted.state, granted.at, starts, MAX_SLACK)


def spent(granted: Grant, now: datetime, starts: int) -> RateState | None:
    """The rate's state after ``starts`` of the granted rows were claimed (None: unchanged)."""
    if granted.rate is None or starts == 0:
        return None
    return spend_state(granted.rate, granted.state, now, starts)


def check_room(row: Mapping[str, Any], rule: FlowRule, cap: int | None) -> None:
    """A new rule of types must leave the namespace within ``cap`` rules (``limit_room``'s
    row says whether the pattern has one already and how many there are): CapReached naming
    ``pattern`` otherwise. Changing an existing rule, or a destination's, is always allowed."""
    if cap is None or rule.destination is not None or row["present"]:
        return
    if int(row["rules"]) >= cap:
        where = f"namespace {rule.namespace!r}"
        raise CapReached("pattern", where, "limit and pause rules", cap, "max_limits")


def shown_rules(rules: Sequence[FlowRule], cursor: str | None, limit: int) -> list[FlowRule]:
    """The rules of one page (by pattern, after the cursor's), with one more when another page
    follows; ``rules`` are the namespace's, as ``list_limits`` orders them."""
    after = decode_pattern_cursor(cursor)
    return [rule for rule in rules if rule.pattern > after][: limit + 1]


@dataclass(frozen=True, slots=True)
class RuleTally:
    """What a store's ``tally_rules`` needs to count a page of rules in the database, so that
    however many types a namespace holds, one row per rule of the page comes back to Python.

    ``limits``: every limit's pattern, most specific first (the first that matches a type
    governs it: :func:`~duetime.model.flow_rules.plan_of`'s order); ``destinations``: each
    destination with a rule, and that rule's pattern (its deliveries are that rule's alone);
    ``shown``: the page's patterns, each with whether the rule only pauses (it then counts every
    row of a type it matches, as :meth:`~duetime.model.flow_rules.FlowPlan.counted_by` says)."""

    limits: tuple[str, ...]
    destinations: tuple[tuple[str, str], ...]
    shown: tuple[tuple[str, bool], ...]


def rule_tally(rules: Sequence[FlowRule], shown: Sequence[FlowRule]) -> RuleTally:
    """The tally of ``shown`` (some of ``rules``, the namespace's all)."""
    limits = sorted(
        (r.pattern for r in rules if r.limits and r.destination is None), key=specificity
    )
    destinations = tuple(
        (r.destination, r.pattern) for r in rules if r.limits and r.destination is not None
    )
    page = tuple((r.pattern, r.paused and not r.limits) for r in shown)
    return RuleTally(tuple(limits), destinations, page)


def tallied_page(
    shown: Sequence[FlowRule],
    counted: Sequence[Mapping[str, Any]],
    limit: int,
    instant: Callable[[Any], datetime],
) -> Page[FlowStatus]:
    """The page of ``shown`` (from :func:`shown_rules`, one more than ``limit`` when another
    page follows) with ``counted``, the rows ``tally_rules`` gave for its first ``limit``."""
    by_pattern = {row["pattern"]: row for row in counted}
    items: list[FlowStatus] = []
    for rule in shown[:limit]:
        row = by_pattern.get(rule.pattern)
        oldest = None if row is None else row["oldest"]
        items.append(
            FlowStatus(
                rule,
                0 if row is None else int(row["running"]),
                0 if row is None else int(row["held"]),
                None if oldest is None else instant(oldest),
            )
        )
    more = len(shown) > limit and bool(items)
    return Page(items, encode_pattern_cursor(items[-1].rule.pattern) if more else None)


def rule_from_row(row: Mapping[str, Any], instant: Callable[[Any], datetime]) -> FlowRule:
    """A stored row as a rule; ``instant`` decodes the backend's instants."""
    return FlowRule(
        namespace=row["namespace"],
        pattern=row["pattern"],
        concurrency=row["concurrency"],
        rate=rate_of(row),
        burst=row["burst"],
        partition_by=row["partition_by"],
        paused=bool(row["paused"]),
        updated_at=instant(row["updated_at"]),
        destination=row["destination"],
    )


def rule_params(rule: FlowRule) -> dict[str, Any]:
    rate = rule.rate
    return {
        "namespace": rule.namespace,
        "pattern": rule.pattern,
        "concurrency": rule.concurrency,
        "rate_count": None if rate is None else rate.count,
        "rate_period_us": None if rate is None else rate.period // timedelta(microseconds=1),
        "burst": rule.burst,
        "partition_by": rule.partition_by,
        "destination": rule.destination,
    }


LimitClaim = Callable[[Governed, int], Awaitable[tuple[list[Claimed], Grant | None]]]
"""A backend's claim of one limit's rows (at most the int), in the limit's transaction."""
PlainClaim = Callable[[RuleFilter, int], Awaitable[list[Claimed]]]
"""A backend's claim of the rows no rule governs (those the filter takes)."""


def all_governed(plan: FlowPlan, types: object) -> bool:
    """Whether every row a claim of ``types`` may take is one a rule governs, so that the claim
    of the ungoverned types cannot find any: ``types`` lists exact types (a sequence of them, or
    a :class:`~duetime.model.ClaimFilter` of exact types and their handler deliveries, no
    globs, no destinations), each matching a limit's or a pause's pattern."""
    if isinstance(types, ClaimFilter):
        if types.patterns or types.destinations:
            return False
        exact: Sequence[str] = (*types.types, *types.handler_types)
    elif isinstance(types, (list, tuple)):
        exact = types
    else:
        return False
    patterns = [tuple(p.split("*")) for p in plan.governed]
    return bool(exact) and all(any(glob_match(p, t) for p in patterns) for t in exact)


async def claim_under(
    plan: FlowPlan,
    limit: int,
    by_limit: LimitClaim,
    plain: PlainClaim,
    ungoverned: bool = True,
    types: object = None,
) -> RuledClaim:
    """Each limit's share of ``limit`` first (so a backlog of ungoverned types never starves a
    limited one), then the ungoverned types take what is left (unless ``ungoverned`` is False:
    the caller knows none is due, and the limits share all of ``limit``; nor when every type of
    ``types`` is governed, :func:`all_governed`: that claim, a transaction of its own, could
    find nothing). Rows come out oldest first; a rate's rows with the instant their pacing
    counts from, the grant's less its :func:`slack`."""
    if ungoverned and all_governed(plan, types):
        ungoverned = False
    claimed: list[Claimed] = []
    retry_at: datetime | None = None
    held: list[str] = []
    granted_at: dict[int, datetime] = {}
    parts = len(plan.limits) + (1 if ungoverned else 0)
    share = max(1, -(-limit // max(1, parts)))
    for governed in plan.limits:
        room = min(share, limit - len(claimed))
        if room <= 0:
            break
        rows, granted = await by_limit(governed, room)
        claimed.extend(rows)
        if granted is not None and granted.rate is not None:
            paced_from = granted.at - slack(granted, len(rows))
            granted_at.update((row.timer.id, paced_from) for row in rows)
        if granted is not None and granted.retry_at is not None and len(rows) == granted.rows:
            held.append(governed.rule.pattern)
            retry_at = granted.retry_at if retry_at is None else min(retry_at, granted.retry_at)
    short = False
    if ungoverned and len(claimed) < limit:
        room = limit - len(claimed)
        rows = await plain(plan.ungoverned(), room)
        claimed.extend(rows)
        short = len(rows) < room
    claimed.sort(key=lambda c: (-c.timer.priority, c.timer.run_at, c.timer.id))
    return RuledClaim(claimed, retry_at, tuple(held), short, granted_at)


def next_run_parts(
    plan: FlowPlan, held: Sequence[str], ungoverned: bool = True
) -> list[RuleFilter]:
    """The (only, excluded) glob pairs whose earliest due row wakes a worker: the ungoverned
    types (unless the caller knows already), and each limit not holding rows back (those are
    retried at their own instant)."""
    parts = [plan.ungoverned()] if ungoverned else []
    for governed in plan.limits:
        if governed.rule.pattern not in held:
            parts.append(plan.filter_of(governed))
    return parts
