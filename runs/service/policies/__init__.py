"""Approval policies per tool: rules that ask, ask once per notebook, allow or refuse a call.

`rules` finds the rules that apply to a notebook and what they decide (and sets and revokes
them), `match` reads a rule's condition on the call's arguments, `screen` applies them to a
waiting tool-call step and records each automatic decision in the audit.
"""

from runs.service.policies.match import ConditionError, parse_condition
from runs.service.policies.rules import (
    RuleSpec,
    create_rule,
    describe,
    gates_calls,
    revoke_rule,
    rules_for,
)
from runs.service.policies.screen import (
    Screening,
    record_approvals,
    remember_asked_once,
    screen,
)
from runs.service.policies.setting import (
    refresh_gate,
    revoke_policies,
    revoke_policy,
    save_default_policy,
    set_policy,
)

__all__ = [
    "ConditionError",
    "RuleSpec",
    "Screening",
    "create_rule",
    "describe",
    "gates_calls",
    "parse_condition",
    "record_approvals",
    "refresh_gate",
    "revoke_policies",
    "revoke_policy",
    "save_default_policy",
    "set_policy",
    "remember_asked_once",
    "revoke_rule",
    "rules_for",
    "screen",
]
