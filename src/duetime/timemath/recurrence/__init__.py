"""Recurrences: when a Schedule's occurrences fall, as pure functions of the rule.

A :class:`Recurrence` is either a 5-field cron expression (or ``@daily``-style alias) read on
an IANA zone's wall clock, or a fixed interval (``every``) counted in real elapsed time. The set
of occurrence instants depends on the rule alone, never on when we ask: :func:`next_after` from
any instant lands on the same instants, so a restarted worker neither drifts nor fires twice.

Cron DST rules are cronie's (Vixie cron's ``cron.c``, which classifies each clock jump):

* A *fixed-time* job (neither the minute nor the hour field starts with ``*``): a match whose
  wall time falls in a spring-forward gap fires once at the first instant after the gap
  (``on_gap="run_after"``; several skipped matches collapse into that one firing) or not at all
  (``on_gap="skip"``). A match in a repeated (fall-back) hour fires once, at its first
  occurrence (``on_overlap="once"``), or at both instants (``on_overlap="both"``). As in cronie,
  a gap longer than 3 hours is a jump of the clock, not a DST change: its matches are dropped,
  not collapsed (Pacific/Apia skipped 2011-12-30; ``0 12 * * *`` fires Dec 29 and Dec 31 only,
  where cronsim would add a firing at 2011-12-31 00:00 +14).
* A *wildcard* job (``*/30 * * * *``, ``0 */2 * * *``, ``15 * * * *``, ``@hourly``) is matched
  against the wall clock as it actually happens: gap times never occur, repeated times fire
  twice, so it keeps its rhythm in real time. ``on_gap``/``on_overlap`` do not change it.
* Never two firings at one instant: a collapsed firing that lands on a real match is one.

Intervals fire at ``start_at + k * every`` (else on the grid of a given anchor), so restarts do
not drift and DST is ignored. Catch-up after downtime: :func:`catch_up_due`.
"""

from __future__ import annotations

from duetime.timemath.recurrence.cron import CLOCK_JUMP, CRON_SEARCH_YEARS, OnGap, OnOverlap
from duetime.timemath.recurrence.day_filter import RULE_SEARCH_YEARS
from duetime.timemath.recurrence.occurrences import (
    catch_up_due,
    describe,
    iter_occurrences,
    next_after,
    occurrences,
    occurrences_between,
)
from duetime.timemath.recurrence.rule import (
    CATCH_UP,
    CRON_ALIASES,
    MIN_EVERY,
    ON_GAP,
    ON_OVERLAP,
    CatchUpPolicy,
    Recurrence,
    parse_catch_up,
    parse_recurrence,
)

__all__ = [
    "CATCH_UP",
    "CLOCK_JUMP",
    "CRON_ALIASES",
    "CRON_SEARCH_YEARS",
    "MIN_EVERY",
    "ON_GAP",
    "ON_OVERLAP",
    "RULE_SEARCH_YEARS",
    "CatchUpPolicy",
    "OnGap",
    "OnOverlap",
    "Recurrence",
    "catch_up_due",
    "describe",
    "iter_occurrences",
    "next_after",
    "occurrences",
    "occurrences_between",
    "parse_catch_up",
    "parse_recurrence",
]
