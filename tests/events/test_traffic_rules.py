"""An on-sale's traffic rules: every refusal with its message, first match wins, every condition
of a rule must match, addresses (IPv4, IPv6, IPv4-mapped, a network's first and last address,
none), globs, headers, cookies, the default, and the canonical form parsing back to the same
rules and the same decisions."""

from __future__ import annotations

import ipaddress
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.traffic_rules import (
    ENTRIES_MAX,
    MESSAGES_MAX,
    TEXT_MAX_LENGTH,
    TRAFFIC_RULES_MAX,
    TrafficAction,
    TrafficDecision,
    TrafficRequest,
    TrafficRulesError,
    parse_traffic_rules,
    traffic_decision,
    traffic_rules_json,
)
from tests.traffic_rule_cases import raw_rules, traffic_request, traffic_requests

BYPASS, QUEUE, BLOCK = TrafficAction.BYPASS, TrafficAction.QUEUE, TrafficAction.BLOCK


def decide(raw: object, req: TrafficRequest) -> TrafficDecision:
    return traffic_decision(parse_traffic_rules(raw), req)


def refusals(raw: object) -> list[str]:
    with pytest.raises(TrafficRulesError) as caught:
        parse_traffic_rules(raw)
    fields = caught.value.fields()
    assert list(fields) == ["traffic_rules"]
    assert fields["traffic_rules"] == list(caught.value.messages)
    return fields["traffic_rules"]


# ------------------------------------------------------------------------- refusals


def test_no_rules_are_none_or_an_empty_list() -> None:
    assert parse_traffic_rules(None) == ()
    assert parse_traffic_rules([]) == ()


@pytest.mark.parametrize("raw", [{}, "[]", 3, {"action": "block", "ip": ["10.0.0.1"]}])
def test_rules_must_be_a_list(raw: object) -> None:
    assert refusals(raw) == ["Traffic rules must be a list of rules."]


@pytest.mark.parametrize("item", [[], "block", None, 1])
def test_a_rule_must_be_an_object(item: object) -> None:
    assert refusals([{"action": "block", "ip": ["10.0.0.1"]}, item]) == [
        "rule 2: a rule must be an object with an action and its conditions."
    ]


def test_an_unknown_action_and_a_missing_one() -> None:
    assert refusals([{"action": "allow", "ip": ["10.0.0.1"]}]) == [
        'rule 1: unknown action "allow" (bypass, queue or block).'
    ]
    assert refusals([{"action": ["block"], "ip": ["10.0.0.1"]}]) == [
        'rule 1: unknown action ["block"] (bypass, queue or block).'
    ]
    assert refusals([{"ip": ["10.0.0.1"]}]) == ["rule 1: needs an action (bypass, queue or block)."]


def test_an_unknown_condition_key() -> None:
    assert refusals([{"action": "block", "ip": ["10.0.0.1"], "country": ["FR"]}]) == [
        'rule 1: unknown key "country" (a rule has an action and any of '
        "ip, path, header, cookie, user_agent)."
    ]


def test_a_rule_needs_at_least_one_condition() -> None:
    assert refusals([{"action": "block"}]) == [
        "rule 1: a rule needs at least one condition (ip, path, header, cookie, user_agent)."
    ]


def test_a_bad_address_is_named() -> None:
    assert refusals([{"action": "block", "path": ["/a"]}, {"action": "block", "ip": [
        "10.0.0.0/8", "10.0.0.300/8", "2001:db8::g", "localhost"
    ]}]) == [
        'rule 2: "10.0.0.300/8" is not an address or network.',
        'rule 2: "2001:db8::g" is not an address or network.',
        'rule 2: "localhost" is not an address or network.',
    ]  # fmt: skip


def test_a_network_with_host_bits_set_is_refused_with_what_was_meant() -> None:
    # Refused, not widened: "10.0.0.1/8" is most often one address with a stray suffix, and
    # widening it would bypass or block sixteen million addresses without anyone seeing it.
    assert refusals([{"action": "bypass", "ip": ["10.0.0.1/8"]}]) == [
        'rule 1: "10.0.0.1/8" has host bits set (did you mean the network "10.0.0.0/8", '
        'or the one address "10.0.0.1"?).'
    ]
    assert refusals([{"action": "bypass", "ip": ["2001:db8::1/32"]}]) == [
        'rule 1: "2001:db8::1/32" has host bits set (did you mean the network '
        '"2001:db8::/32", or the one address "2001:db8::1"?).'
    ]


@pytest.mark.parametrize(
    ("key", "empty", "shape"),
    [("ip", [], "list"), ("path", [], "list"), ("user_agent", [], "list"),
     ("header", {}, "object"), ("cookie", {}, "object")],
)  # fmt: skip
def test_an_empty_condition_is_refused(key: str, empty: object, shape: str) -> None:
    assert refusals([{"action": "block", key: empty}]) == [
        f"rule 1: {key} is an empty {shape}; leave it out to match any request."
    ]


@pytest.mark.parametrize(
    ("key", "wrong", "shape"),
    [("ip", "10.0.0.1", "list"), ("path", {"/a": 1}, "list"), ("user_agent", "bot", "list"),
     ("header", ["x-a"], "object"), ("cookie", "a=b", "object")],
)  # fmt: skip
def test_a_condition_of_the_wrong_shape_is_refused(key: str, wrong: object, shape: str) -> None:
    assert refusals([{"action": "block", key: wrong}]) == [f"rule 1: {key} must be a {shape}."]


def test_values_must_be_strings() -> None:
    assert refusals([
        {"action": "block", "ip": [167772161, None]},
        {"action": "block", "path": [True]},
        {"action": "block", "header": {"x-a": 1}},
        {"action": "block", "cookie": {"c": ["v"]}},
        {"action": "block", "user_agent": [{"a": 1}]},
    ]) == [
        "rule 1: address 167772161 is not a string.",
        "rule 1: address null is not a string.",
        "rule 2: pattern true is not a string.",
        'rule 3: header "x-a" 1 is not a string.',
        'rule 4: cookie "c" ["v"] is not a string.',
        'rule 5: pattern {"a": 1} is not a string.',
    ]  # fmt: skip


def test_empty_strings_are_refused() -> None:
    assert refusals([
        {"action": "block", "ip": [""]},
        {"action": "block", "path": [""]},
        {"action": "block", "header": {"x-a": ""}},
        {"action": "block", "cookie": {"": "v"}},
    ]) == [
        "rule 1: address is empty.",
        "rule 2: pattern is empty.",
        'rule 3: header "x-a" is empty.',
        "rule 4: cookie name is empty.",
    ]  # fmt: skip


def test_a_path_pattern_starts_with_a_slash() -> None:
    assert refusals([{"action": "bypass", "path": ["/ok", "shop/*"]}]) == [
        'rule 1: path "shop/*" does not start with /; a path always does.'
    ]


def test_header_and_cookie_names_are_tokens_and_given_once() -> None:
    assert refusals([
        {"action": "block", "header": {"X Key": "a"}},
        {"action": "block", "header": {"X-Key": "a", "x-key": "a"}},
        {"action": "block", "cookie": {"a;b": "v"}},
    ]) == [
        'rule 1: header name "X Key" is not a valid header name.',
        'rule 2: header "x-key" is given twice.',
        'rule 3: cookie name "a;b" is not a valid cookie name.',
    ]  # fmt: skip


def test_text_postgresql_cannot_store_is_refused() -> None:
    assert refusals([{"action": "block", "path": ["/a\x00"]}]) == [
        'rule 1: pattern "/a\\u0000" holds a character that cannot be stored.'
    ]


def test_too_many_rules() -> None:
    rule = {"action": "block", "ip": ["10.0.0.1"]}
    assert len(parse_traffic_rules([rule] * TRAFFIC_RULES_MAX)) == TRAFFIC_RULES_MAX
    assert refusals([rule] * (TRAFFIC_RULES_MAX + 1)) == [
        f"{TRAFFIC_RULES_MAX + 1} traffic rules; an on-sale may have at most {TRAFFIC_RULES_MAX}."
    ]


def test_too_many_entries_in_a_condition() -> None:
    addresses = [str(ipaddress.IPv4Address(167772160 + i)) for i in range(ENTRIES_MAX + 1)]
    assert parse_traffic_rules([{"action": "block", "ip": addresses[:-1]}])
    assert refusals([{"action": "block", "ip": addresses}]) == [
        f"rule 1: ip has {ENTRIES_MAX + 1} entries; at most {ENTRIES_MAX}."
    ]
    headers = {f"x-{i}": "v" for i in range(ENTRIES_MAX + 1)}
    assert refusals([{"action": "block", "header": headers}]) == [
        f"rule 1: header has {ENTRIES_MAX + 1} entries; at most {ENTRIES_MAX}."
    ]


def test_too_long_a_pattern_is_refused_and_not_echoed_whole() -> None:
    fits = "/" + "a" * (TEXT_MAX_LENGTH - 1)
    assert parse_traffic_rules([{"action": "bypass", "path": [fits]}])
    [message] = refusals([{"action": "bypass", "path": [fits + "a"]}])
    assert message.startswith('rule 1: pattern "/aaa')
    assert message.endswith(f'..." is over {TEXT_MAX_LENGTH} characters.')
    assert len(message) < 120


def test_every_fault_is_told_up_to_a_cap() -> None:
    messages = refusals([{"action": "block", "ip": [f"bad{i}" for i in range(30)]}])
    assert len(messages) == MESSAGES_MAX + 1
    assert messages[0] == 'rule 1: "bad0" is not an address or network.'
    assert messages[-1] == f"... and {30 - MESSAGES_MAX} more."


def test_the_error_is_a_value_error_and_reads_as_its_messages() -> None:
    with pytest.raises(ValueError, match=r"rule 1: needs an action"):
        parse_traffic_rules([{"ip": ["10.0.0.1"]}])


# ------------------------------------------------------------------------ decisions


def test_no_rule_matching_means_queue() -> None:
    assert decide([], traffic_request()) == TrafficDecision(QUEUE, None)
    assert decide([{"action": "block", "ip": ["10.0.0.1"]}], traffic_request()) == TrafficDecision(
        QUEUE, None
    )


def test_the_first_match_wins_and_its_index_is_told() -> None:
    rules = [
        {"action": "block", "path": ["/admin/*"]},
        {"action": "bypass", "ip": ["10.0.0.0/8"]},
        {"action": "block", "ip": ["10.1.0.0/16"]},
        {"action": "queue", "path": ["/*"]},
    ]
    assert decide(rules, traffic_request("10.1.2.3", "/admin/x")) == TrafficDecision(BLOCK, 0)
    assert decide(rules, traffic_request("10.1.2.3", "/shop")) == TrafficDecision(BYPASS, 1)
    assert decide(rules, traffic_request("192.0.2.1", "/shop")) == TrafficDecision(QUEUE, 3)
    assert decide(rules, traffic_request("192.0.2.1", "")) == TrafficDecision(QUEUE, None)


def test_every_condition_of_a_rule_must_match() -> None:
    rules = [
        {
            "action": "bypass",
            "ip": ["10.0.0.0/8"],
            "path": ["/shop/*"],
            "header": {"X-Partner": "acme"},
            "cookie": {"tier": "gold"},
            "user_agent": ["*AcmeBot*"],
        }
    ]
    good = {
        "address": "10.9.9.9",
        "path": "/shop/item",
        "headers": {"x-partner": "acme"},
        "cookies": {"tier": "gold"},
        "user_agent": "Mozilla/5.0 acmebot/1.0",
    }
    assert decide(rules, traffic_request(**good)) == TrafficDecision(BYPASS, 0)
    for key, wrong in [
        ("address", "11.0.0.1"),
        ("address", None),
        ("path", "/other"),
        ("headers", {"x-partner": "other"}),
        ("headers", {}),
        ("cookies", {"tier": "silver"}),
        ("cookies", {}),
        ("user_agent", "curl/8"),
    ]:
        assert decide(rules, traffic_request(**{**good, key: wrong})) == TrafficDecision(
            QUEUE, None
        ), key


def test_ipv4_addresses_and_a_networks_edges() -> None:
    rules = [{"action": "block", "ip": ["203.0.113.7", "192.0.2.0/24"]}]
    for inside in ("203.0.113.7", "192.0.2.0", "192.0.2.128", "192.0.2.255"):
        assert decide(rules, traffic_request(inside)).action == BLOCK, inside
    for outside in ("203.0.113.6", "203.0.113.8", "192.0.1.255", "192.0.3.0"):
        assert decide(rules, traffic_request(outside)).action == QUEUE, outside


def test_ipv6_addresses_and_a_networks_edges() -> None:
    rules = [{"action": "bypass", "ip": ["2001:db8::/32", "2001:db9::7"]}]
    for inside in ("2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::7"):
        assert decide(rules, traffic_request(inside)).action == BYPASS, inside
    for outside in ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::", "2001:db9::8"):
        assert decide(rules, traffic_request(outside)).action == QUEUE, outside


def test_the_versions_do_not_meet_by_number() -> None:
    # 10.0.0.1 and ::a00:1 share an integer: each version has its own ranges.
    assert (
        decide([{"action": "block", "ip": ["10.0.0.1"]}], traffic_request("::a00:1")).action
        == QUEUE
    )
    assert (
        decide([{"action": "block", "ip": ["::a00:1"]}], traffic_request("10.0.0.1")).action
        == QUEUE
    )


def test_an_ipv4_mapped_client_meets_the_ipv4_rules() -> None:
    rules = [{"action": "block", "ip": ["10.0.0.0/8"]}]
    assert decide(rules, traffic_request("::ffff:10.1.2.3")) == TrafficDecision(BLOCK, 0)
    assert decide(rules, traffic_request("::ffff:11.1.2.3")) == TrafficDecision(QUEUE, None)


def test_an_ipv4_mapped_rule_is_the_ipv4_one() -> None:
    rules = parse_traffic_rules(
        [{"action": "block", "ip": ["::ffff:10.0.0.0/104", "::ffff:1.2.3.4"]}]
    )
    assert traffic_rules_json(rules) == [{"action": "block", "ip": ["10.0.0.0/8", "1.2.3.4"]}]
    assert traffic_decision(rules, traffic_request("10.200.0.1")).action == BLOCK
    assert traffic_decision(rules, traffic_request("::ffff:1.2.3.4")).action == BLOCK


def test_a_rule_with_an_address_does_not_match_a_request_without_one() -> None:
    rules = [{"action": "block", "ip": ["0.0.0.0/0", "::/0"]}, {"action": "bypass", "path": ["/*"]}]
    assert decide(rules, traffic_request(None)) == TrafficDecision(BYPASS, 1)
    assert decide(rules, traffic_request("::1")) == TrafficDecision(BLOCK, 0)


def test_a_path_star_crosses_slashes_and_the_glob_matches_the_whole_path() -> None:
    rules = [
        {"action": "bypass", "path": ["/api/*/health"]},
        {"action": "block", "path": ["/shop/*", "/item-?", "/c/[ab]"]},
    ]
    assert decide(rules, traffic_request(path="/api/v1/health")).rule == 0
    assert decide(rules, traffic_request(path="/api/v1/deep/health")).rule == 0  # * crosses /
    assert decide(rules, traffic_request(path="/api/v1/health/more")).rule is None  # whole path
    assert decide(rules, traffic_request(path="/x/api/v1/health")).rule is None
    assert decide(rules, traffic_request(path="/shop/a/b/c")).rule == 1
    assert decide(rules, traffic_request(path="/shop/")).rule == 1
    assert decide(rules, traffic_request(path="/shop")).rule is None
    assert decide(rules, traffic_request(path="/item-7")).rule == 1
    assert decide(rules, traffic_request(path="/item-77")).rule is None
    assert decide(rules, traffic_request(path="/c/b")).rule == 1
    assert decide(rules, traffic_request(path="/c/c")).rule is None


def test_paths_are_case_sensitive_and_regex_characters_are_literal() -> None:
    rules = [{"action": "block", "path": ["/Shop/a.b+(c)"]}]
    assert decide(rules, traffic_request(path="/Shop/a.b+(c)")).action == BLOCK
    assert decide(rules, traffic_request(path="/shop/a.b+(c)")).action == QUEUE
    assert decide(rules, traffic_request(path="/Shop/aXb+(c)")).action == QUEUE


def test_user_agents_are_globs_without_case() -> None:
    rules = [{"action": "bypass", "user_agent": ["*googlebot*", "Monitor/?.*"]}]
    assert (
        decide(rules, traffic_request(user_agent="Mozilla/5.0 (compatible; Googlebot/2.1)")).rule
        == 0
    )
    assert decide(rules, traffic_request(user_agent="MONITOR/2.0")).rule == 0
    assert decide(rules, traffic_request(user_agent="monitor/10.0")).rule is None
    assert decide(rules, traffic_request(user_agent="")).rule is None


def test_headers_have_names_without_case_and_exact_values() -> None:
    rules = [{"action": "bypass", "header": {"X-Partner-Key": "S3cret", "X-Env": "prod"}}]
    both = {"x-partner-key": "S3cret", "x-env": "prod"}
    assert decide(rules, traffic_request(headers=both)).action == BYPASS
    assert decide(rules, traffic_request(headers={**both, "x-other": "1"})).action == BYPASS
    assert (
        decide(rules, traffic_request(headers={**both, "x-partner-key": "s3cret"})).action == QUEUE
    )
    assert (
        decide(rules, traffic_request(headers={**both, "x-partner-key": "S3cret "})).action == QUEUE
    )
    assert decide(rules, traffic_request(headers={"x-partner-key": "S3cret"})).action == QUEUE


def test_cookies_have_exact_names_and_values() -> None:
    rules = [{"action": "block", "cookie": {"Session": "banned", "b": "1"}}]
    assert decide(rules, traffic_request(cookies={"Session": "banned", "b": "1"})).action == BLOCK
    assert decide(rules, traffic_request(cookies={"session": "banned", "b": "1"})).action == QUEUE
    assert decide(rules, traffic_request(cookies={"Session": "Banned", "b": "1"})).action == QUEUE
    assert decide(rules, traffic_request(cookies={"Session": "banned"})).action == QUEUE


# --------------------------------------------------------------- the canonical form


def test_the_canonical_form() -> None:
    raw = [
        {
            "user_agent": ["*Bot*", "*Bot*"],
            "header": {"X-B": "2", "x-a": "1"},
            "action": "bypass",
            "ip": [" 10.0.0.0/8 ", "2001:DB8:0::/32", "203.0.113.7/32", "10.0.0.0/8", "::1"],
        },
        {"cookie": {"b": "2", "a": "1"}, "path": ["/a", "/b", "/a"], "action": "block"},
    ]
    stored = traffic_rules_json(parse_traffic_rules(raw))
    assert stored == [
        {
            "action": "bypass",
            "ip": ["10.0.0.0/8", "2001:db8::/32", "203.0.113.7", "::1"],
            "header": {"x-a": "1", "x-b": "2"},
            "user_agent": ["*Bot*"],
        },
        {"action": "block", "path": ["/a", "/b"], "cookie": {"a": "1", "b": "2"}},
    ]
    assert [list(rule) for rule in stored] == [
        ["action", "ip", "header", "user_agent"],
        ["action", "path", "cookie"],
    ]
    assert json.loads(json.dumps(stored)) == stored
    assert parse_traffic_rules(stored) == parse_traffic_rules(raw)
    assert traffic_rules_json(parse_traffic_rules(stored)) == stored


def _naive(raw: list[dict], req: TrafficRequest) -> TrafficDecision:
    """The rules as the docs say them, with no compiling: the oracle for the fast path."""
    address = req.address
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for index, rule in enumerate(raw):
        networks = [ipaddress.ip_network(n) for n in rule.get("ip", [])]
        networks = [
            ipaddress.ip_network(f"{n.network_address.ipv4_mapped}/{n.prefixlen - 96}")
            if n.version == 6 and n.network_address.ipv4_mapped and n.prefixlen >= 96
            else n
            for n in networks
        ]
        checks = [
            "ip" not in rule or (address is not None and any(address in n for n in networks)),
            "path" not in rule or any(_glob(p, req.path) for p in rule["path"]),
            all(req.headers.get(k.lower()) == v for k, v in rule.get("header", {}).items()),
            all(req.cookies.get(k) == v for k, v in rule.get("cookie", {}).items()),
            "user_agent" not in rule
            or any(_glob(p.lower(), req.user_agent.lower()) for p in rule["user_agent"]),
        ]
        if all(checks):
            return TrafficDecision(TrafficAction(rule["action"]), index)
    return TrafficDecision(QUEUE, None)


def _glob(pattern: str, text: str) -> bool:
    """A glob by hand (``*`` any run, ``?`` one character), case as given."""
    if not pattern:
        return not text
    if pattern[0] == "*":
        return any(_glob(pattern[1:], text[i:]) for i in range(len(text) + 1))
    if not text:
        return False
    return (pattern[0] == "?" or pattern[0] == text[0]) and _glob(pattern[1:], text[1:])


@given(raw=raw_rules, reqs=st.lists(traffic_requests, min_size=1, max_size=8))
def test_the_canonical_form_decides_as_the_rules_it_came_from(
    raw: list[dict], reqs: list[TrafficRequest]
) -> None:
    rules = parse_traffic_rules(raw)
    again = parse_traffic_rules(json.loads(json.dumps(traffic_rules_json(rules))))
    assert again == rules
    assert traffic_rules_json(again) == traffic_rules_json(rules)
    for req in reqs:
        decision = traffic_decision(rules, req)
        assert traffic_decision(again, req) == decision
        assert decision == _naive(raw, req)


def test_a_decisions_cost_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """A figure to read, not a limit: speed is held by the benchmarks, not by unit tests."""
    rules = parse_traffic_rules(
        [{"action": "block", "ip": [f"10.{i}.0.0/16" for i in range(200)]}]
        + [{"action": "bypass", "path": [f"/partner-{i}/*"]} for i in range(8)]
        + [{"action": "bypass", "header": {"x-key": "k"}, "user_agent": ["*Partner*"]}]
    )
    req = traffic_request("192.0.2.1", "/shop/item", {"x-key": "other"}, {}, "Mozilla/5.0")
    rounds = 20_000
    start = time.perf_counter()
    for _ in range(rounds):
        traffic_decision(rules, req)
    per_rule = (time.perf_counter() - start) / rounds / len(rules) * 1e6
    with capsys.disabled():
        print(f"\ntraffic_decision: {per_rule:.2f} µs per rule ({len(rules)} rules, none match)")
    assert traffic_decision(rules, req) == TrafficDecision(QUEUE, None)
