"""Which rule governs a type: pauses always hold; the most specific limit governs alone."""

from __future__ import annotations

from datetime import timedelta

from duetime.model.flow_rules import (
    FlowRule,
    RuleFilter,
    destination_rule,
    plan_of,
    specificity,
)
from duetime.observability.metrics import Metrics
from duetime.timemath.ratelimit import Rate


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
    assert plan.filter_of(plan.limits[1]) == RuleFilter("email.*", ("email.welcome", "crm.sync"))
    assert plan_of([]).empty
    assert sorted(["a*", "abc", "ab*"], key=specificity) == ["abc", "ab*", "a*"]


def test_a_destination_rule_governs_its_deliveries_alone_and_the_others_leave_them() -> None:
    rate = Rate(10, timedelta(seconds=1))
    hook = destination_rule("ns", "hook", rate, None)
    rules = [FlowRule("ns", "order.*", rate=rate), hook, FlowRule("ns", "crm.sync", paused=True)]
    plan = plan_of(rules)
    assert hook.pattern == "@hook"
    assert hook.destination == "hook"
    assert [g.rule.pattern for g in plan.limits] == ["@hook", "order.*"]
    assert plan.destinations == ("hook",)
    assert plan.governed == ("order.*", "crm.sync")
    # Every type's deliveries to the destination, not held by the type's own limit; a pause holds.
    assert plan.filter_of(plan.limits[0]) == RuleFilter("*", ("crm.sync",), "hook")
    assert plan.counted_by(hook) == RuleFilter("*", (), "hook")
    assert plan.filter_of(plan.limits[1]) == RuleFilter("order.*", ("crm.sync",), None, ("hook",))
    assert plan.ungoverned() == RuleFilter("*", ("order.*", "crm.sync"), None, ("hook",))


def test_held_back_limits_are_counted_by_rule() -> None:
    metrics = Metrics()
    metrics.held_back("ns", "email.*")
    metrics.held_back("ns", "email.*")
    value = metrics.registry.get_sample_value(
        "duetime_limited_total", {"namespace": "ns", "rule": "email.*"}
    )
    assert value == 2
