"""The integration config built from traffic rules (queueing/rules/queueit_config.py): what the
connector's triggers can say exactly, what they cannot (said in NotExpressible), and Queue-it's
own connector choosing, for every request of a grid, the action the room's own traffic rules
choose (events/traffic_rules.py)."""

from __future__ import annotations

import itertools

import pytest

from events.traffic_rules import (
    TrafficAction,
    TrafficRequest,
    parse_traffic_rules,
    traffic_decision,
)
from queueing.rules.queueit_config import QueueitOnSale, integration_config
from tests.queueit import connector_actions, needs_node_shop

SECRET = "config-test-secret-0123"


def on_sale(rules: list[dict], event_id: str = "sale-1") -> QueueitOnSale:
    return QueueitOnSale(
        event_id=event_id,
        name="The Sale",
        cookie_validity_minutes=15,
        rules=parse_traffic_rules(rules),
    )


def config_of(*on_sales: QueueitOnSale) -> dict:
    return integration_config(
        list(on_sales), customer_id="acme", queue_domain="room.example/queueit", version=7
    )


def test_each_rule_an_integration_then_the_catch_all() -> None:
    config = config_of(
        on_sale(
            [
                {"action": "bypass", "path": ["/static/*", "/health"]},  # one glob not exact
                {"action": "bypass", "path": ["/health"], "user_agent": ["*monitor*", "curl/8.0"]},
                {"action": "block", "user_agent": ["*bot*"]},
                {"action": "queue", "ip": ["10.0.0.0/8"]},
                {"action": "bypass", "cookie": {"staff": "yes"}, "header": {"x-preview": "1"}},
            ]
        )
    )
    assert config["Version"] == 7 and config["CustomerId"] == "acme"
    actions = [(i["Name"], i["ActionType"]) for i in config["Integrations"]]
    assert actions == [
        ("The Sale (rule 2: bypass)", "Ignore"),
        ("The Sale (rule 5: bypass)", "Ignore"),
        ("The Sale", "Queue"),
    ]
    first = config["Integrations"][0]
    assert first["EventId"] == "sale-1" and first["QueueDomain"] == "room.example/queueit"
    assert first["CookieValidityMinute"] == 15 and first["RedirectLogic"] == "AllowTargetUrl"
    # "/health" and (an agent equal to curl/8.0 or containing "monitor"): two triggers.
    parts = [t["TriggerParts"] for t in first["Triggers"]]
    assert [[(p["Operator"], p["ValuesToCompare"]) for p in ps] for ps in parts] == [
        [("EqualsAny", ["/health"]), ("EqualsAny", ["curl/8.0"])],
        [("EqualsAny", ["/health"]), ("ContainsAny", ["monitor"])],
    ]
    assert parts[0][1]["IsIgnoreCase"] is True and parts[0][0]["IsIgnoreCase"] is False
    both = config["Integrations"][1]["Triggers"]
    assert len(both) == 1 and both[0]["LogicalOperator"] == "And"
    assert {p["ValidatorType"] for p in both[0]["TriggerParts"]} == {
        "CookieValidator",
        "HttpHeaderValidator",
    }
    reasons = {(n["Rule"], n["Reason"].split(":")[0]) for n in config["NotExpressible"]}
    assert reasons == {
        (1, "the path glob '/static/*' has no exact trigger"),
        (3, "a block rule"),
        (4, "an ip condition"),
    }


def test_several_on_sales_get_no_catch_all() -> None:
    config = config_of(
        on_sale([{"action": "queue", "path": ["/tour"]}], "tour"),
        on_sale([{"action": "queue", "path": ["/gig"]}], "gig"),
    )
    assert [(i["EventId"], i["ActionType"]) for i in config["Integrations"]] == [
        ("tour", "Queue"),
        ("gig", "Queue"),
    ]


RULES = [
    {"action": "bypass", "path": ["/health", "/static/app.css"]},
    {"action": "bypass", "user_agent": ["*Monitor*", "curl/8.0"]},
    {"action": "queue", "path": ["/checkout"], "cookie": {"tier": "gold"}},
    {"action": "bypass", "path": ["/checkout", "/api"], "header": {"x-staff": "yes"}},
    {"action": "bypass", "cookie": {"preview": "1"}, "user_agent": ["*"]},
]
PATHS = ["/", "/health", "/healthz", "/static/app.css", "/checkout", "/api", "/API"]
AGENTS = ["Mozilla/5.0", "UptimeMONITOR/2", "curl/8.0", "CURL/8.0", ""]
HEADERS = [{}, {"x-staff": "yes"}, {"x-staff": "no"}]
COOKIES = [{}, {"tier": "gold"}, {"preview": "1"}, {"tier": "gold", "preview": "1"}]


@needs_node_shop
def test_the_connector_decides_as_the_rules_do() -> None:
    rules = parse_traffic_rules(RULES)
    config = config_of(on_sale(RULES))
    assert config["NotExpressible"] == []
    grid = list(itertools.product(PATHS, AGENTS, HEADERS, COOKIES))
    requests = [
        {
            "url": f"https://shop.example{path}?q=1",
            "userAgent": agent,
            "headers": headers,
            "cookies": cookies,
        }
        for path, agent, headers, cookies in grid
    ]
    actions = connector_actions(config, requests, customer_id="acme", secret_key=SECRET)
    expected = [
        "Ignore"
        if traffic_decision(
            rules,
            TrafficRequest(
                address=None, path=path, headers=headers, cookies=cookies, user_agent=agent
            ),
        ).action
        == TrafficAction.BYPASS
        else "Queue"
        for path, agent, headers, cookies in grid
    ]
    wrong = [(g, a, e) for g, a, e in zip(grid, actions, expected, strict=True) if a != e]
    assert wrong == []
    assert actions.count("Ignore") > 20 and actions.count("Queue") > 20


@pytest.mark.parametrize(
    "rule",
    [
        {"action": "bypass", "path": ["/a?"]},
        {"action": "bypass", "path": ["/[ab]"]},
        {"action": "bypass", "path": ["/static/*"]},
        {"action": "bypass", "user_agent": ["*a*b*"]},
        {"action": "bypass", "user_agent": ["bot*"]},
    ],
)
def test_what_no_trigger_says_exactly_is_left_out(rule: dict) -> None:
    config = config_of(on_sale([rule]))
    assert [i["ActionType"] for i in config["Integrations"]] == ["Queue"]
    assert len(config["NotExpressible"]) == 1
