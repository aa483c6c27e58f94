"""Which rule governs a type: pauses always hold; the most specific limit governs alone."""

from __future__ import annotations

from datetime import timedelta

from duetime.metrics import Metrics
from duetime.model.limits import FlowRule, plan_of, specificity
from duetime.ratelimit import Rate


def test_limits_are_ordered_most_specific_first_and_shadowed_by_those_before() -> None:
    rules = [
        FlowRule("ns", "*", concurrency=100),
        FlowRule("ns", "email.*", concurrency=5),
        FlowRule("ns", "email.welcome", rate=Rate(1, timedelta(seconds=1))),
        FlowRule("ns", "crm.sync", paused=True),
    ]
    plan = plan_of(rules)
    assert [g.rule.pattern for g in plan.limits] == ["email.welcome", "email.*", "*"]
    assert [g.shadows for g in plan.limits] == [
        (),
        ("email.welcome",),
        ("email.welcome", "email.*"),
    ]
    assert plan.paused == ("crm.sync",)
    assert plan.governed == ("email.welcome", "email.*", "*", "crm.sync")
    assert plan.excluded(plan.limits[1]) == ("email.welcome", "crm.sync")
    assert plan_of([]).empty
    assert sorted(["a*", "abc", "ab*"], key=specificity) == ["abc", "ab*", "a*"]


def test_held_back_limits_are_counted_by_rule() -> None:
    metrics = Metrics()
    metrics.held_back("ns", "email.*")
    metrics.held_back("ns", "email.*")
    value = metrics.registry.get_sample_value(
        "duetime_limited_total", {"namespace": "ns", "rule": "email.*"}
    )
    assert value == 2
