"""An on-sale's Queue-it integration config (docs/queueit.md, "The integration config"): the
JSON a Queue-it connector's ``validateRequestByIntegrationConfig`` reads, built from the
on-sales of one customer id and their traffic rules (events/traffic_rules.py). Pure.

The connector tries integrations in order and takes the first whose trigger matches, as the
traffic rules do: each rule becomes one integration, ``bypass`` as an ``Ignore`` action and
``queue`` as a ``Queue`` action, then a catch-all ``Queue``. A trigger is what the connector's
validators can say exactly:

- ``path`` (case-sensitive) and ``user_agent`` (case-insensitive) globs: a glob without
  wildcards is ``EqualsAny``, ``*text*`` is ``ContainsAny``, a lone ``*`` matches anything
  and is left out; any other glob (``/shop/*``, ``?``, ``[...]``) has no exact equivalent;
- ``header`` and ``cookie`` name → exact value: ``Equals`` (an empty value cannot be told
  from a missing header or cookie by the connector: not expressible);
- ``ip``: the connector has no address validator; ``block``: it has no refusing action.

A rule with anything not expressible is left out, and said so in the answer
(``NotExpressible``, rule numbers from 1 as staff count them): the connector then lets such
requests reach the later rules, so the room's own gates remain the place for those rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.traffic_rules import TrafficAction, TrafficRule

# Triggers one rule may become at most (a condition mixing exact and contained values is an
# "or" of two parts, spread over triggers since a trigger is all "and" or all "or").
TRIGGERS_MAX = 16
_WILDCARDS = frozenset("*?[")

Part = dict[str, Any]


@dataclass(frozen=True)
class QueueitOnSale:
    """What the config says of one on-sale."""

    event_id: str  # the effective Queue-it event id
    name: str
    cookie_validity_minutes: int
    rules: tuple[TrafficRule, ...]


class NotExpressible(Exception):
    """A rule the connector's triggers cannot say exactly; the reason."""


def _part(validator: str, operator: str, **fields: Any) -> Part:
    part: Part = {
        "ValidatorType": validator,
        "Operator": operator,
        "ValueToCompare": "",
        "ValuesToCompare": [],
        "IsNegative": False,
        "IsIgnoreCase": False,
    }
    part.update(fields)
    return part


def _glob_alternatives(
    globs: Sequence[str], validator: str, what: str, **fields: Any
) -> list[Part] | None:
    """The parts any of which matches where one of ``globs`` does; None: anything matches."""
    exact: list[str] = []
    contained: list[str] = []
    for glob in globs:
        if glob == "*":
            return None
        inner = glob[1:-1]
        if not _WILDCARDS & set(glob):
            exact.append(glob)
        elif len(glob) > 2 and glob[0] == glob[-1] == "*" and not _WILDCARDS & set(inner):
            contained.append(inner)
        else:
            raise NotExpressible(f"the {what} glob {glob!r} has no exact trigger")
    parts = []
    if exact:
        parts.append(_part(validator, "EqualsAny", ValuesToCompare=exact, **fields))
    if contained:
        parts.append(_part(validator, "ContainsAny", ValuesToCompare=contained, **fields))
    return parts


def rule_triggers(rule: TrafficRule) -> list[dict[str, Any]]:
    """The triggers that match exactly the requests ``rule`` matches (raises NotExpressible)."""
    if rule.action == TrafficAction.BLOCK:
        raise NotExpressible("a block rule: the connector has no action that refuses")
    if rule.ip:
        raise NotExpressible("an ip condition: the connector has no address trigger")
    conditions: list[list[Part]] = []  # all must match; each is "any of these parts"
    if rule.path:
        path = _glob_alternatives(rule.path, "UrlValidator", "path", UrlPart="PagePath")
        if path is not None:
            conditions.append(path)
    if rule.user_agent:
        agent = _glob_alternatives(
            rule.user_agent, "UserAgentValidator", "user_agent", IsIgnoreCase=True
        )
        if agent is not None:
            conditions.append(agent)
    for name, value in rule.header or ():
        if not value:
            raise NotExpressible(f"the header {name!r} with an empty value")
        conditions.append(
            [_part("HttpHeaderValidator", "Equals", ValueToCompare=value, HttpHeaderName=name)]
        )
    for name, value in rule.cookie or ():
        if not value:
            raise NotExpressible(f"the cookie {name!r} with an empty value")
        conditions.append(
            [_part("CookieValidator", "Equals", ValueToCompare=value, CookieName=name)]
        )
    if not conditions:
        return [_catch_all()]
    combinations = list(itertools.islice(itertools.product(*conditions), TRIGGERS_MAX + 1))
    if len(combinations) > TRIGGERS_MAX:
        raise NotExpressible("more than 16 triggers")
    return [{"TriggerParts": list(parts), "LogicalOperator": "And"} for parts in combinations]


def _catch_all() -> dict[str, Any]:
    """Every request (a page path is never empty: it is "/" at least)."""
    part = _part("UrlValidator", "Contains", ValueToCompare="*", UrlPart="PagePath")
    return {"TriggerParts": [part], "LogicalOperator": "And"}


def _integration(
    on_sale: QueueitOnSale,
    *,
    name: str,
    action: str,
    queue_domain: str,
    triggers: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "Name": name,
        "ActionType": action,
        "EventId": on_sale.event_id,
        "CookieDomain": "",
        "IsCookieHttpOnly": False,
        "IsCookieSecure": False,
        "LayoutName": "",
        "Culture": "",
        "ExtendCookieValidity": True,
        "CookieValidityMinute": on_sale.cookie_validity_minutes,
        "QueueDomain": queue_domain,
        "RedirectLogic": "AllowTargetUrl",
        "ForcedTargetUrl": "",
        "Triggers": triggers,
    }


def integration_config(
    on_sales: Sequence[QueueitOnSale], *, customer_id: str, queue_domain: str, version: int
) -> dict[str, Any]:
    """The integration config of ``customer_id``'s on-sales, in the order given. A catch-all
    ``Queue`` ends each on-sale's integrations only where it is the customer's only on-sale:
    with several, the first one's would take every request the rules did not."""
    integrations: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for on_sale in on_sales:
        for number, rule in enumerate(on_sale.rules, start=1):
            try:
                triggers = rule_triggers(rule)
            except NotExpressible as reason:
                left_out.append(
                    {"EventId": on_sale.event_id, "Rule": number, "Reason": str(reason)}
                )
                continue
            action = "Ignore" if rule.action == TrafficAction.BYPASS else "Queue"
            integrations.append(
                _integration(
                    on_sale,
                    name=f"{on_sale.name} (rule {number}: {rule.action.value})",
                    action=action,
                    queue_domain=queue_domain,
                    triggers=triggers,
                )
            )
        if len(on_sales) == 1:
            integrations.append(
                _integration(
                    on_sale,
                    name=on_sale.name,
                    action="Queue",
                    queue_domain=queue_domain,
                    triggers=[_catch_all()],
                )
            )
    return {
        "CustomerId": customer_id,
        "Integrations": integrations,
        "Version": version,
        "Description": "Served by the waiting room from its on-sales and their traffic rules.",
        "NotExpressible": left_out,
    }
