"""Deprecated name: flow control's rules are :mod:`duetime.model.flow_rules`. Importing this
module warns."""

from __future__ import annotations

import warnings

from duetime.model.flow_rules import (
    DESTINATION_PREFIX,
    MAX_CONCURRENCY,
    FlowPlan,
    FlowRule,
    FlowStatus,
    Governed,
    RuledClaim,
    RuleFilter,
    check_concurrency,
    check_partition,
    check_pattern,
    destination_key,
    destination_rule,
    glob_match,
    new_rule,
    partition_field,
    plan_of,
    specificity,
)

warnings.warn(
    "duetime.model.limits is deprecated: import duetime.model.flow_rules",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "DESTINATION_PREFIX",
    "MAX_CONCURRENCY",
    "FlowPlan",
    "FlowRule",
    "FlowStatus",
    "Governed",
    "RuleFilter",
    "RuledClaim",
    "check_concurrency",
    "check_partition",
    "check_pattern",
    "destination_key",
    "destination_rule",
    "glob_match",
    "new_rule",
    "partition_field",
    "plan_of",
    "specificity",
]
