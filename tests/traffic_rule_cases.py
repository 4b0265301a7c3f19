"""Generated traffic rules and requests, shared by the tests of the room's evaluator
(tests/events/test_traffic_rules.py) and of the Django gate's own reading of the rules
(tests/test_django_gate_rules.py): a small world of addresses, paths, headers and cookies, so
that generated rules and requests meet often enough for the decisions to say something."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from hypothesis import strategies as st

from events.traffic_rules import TrafficRequest

NETWORKS = ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "192.0.2.0/24", "2001:db8::/32",
            "2001:db8::1", "2001:db8:77::/48", "::ffff:10.0.0.0/104", "0.0.0.0/0",
            "::/0"]  # fmt: skip
ADDRESSES = ["10.1.2.3", "10.2.0.1", "192.0.2.255", "203.0.113.1", "2001:db8::1",
             "2001:db8:77::5", "2001:db8:78::5", "2001:db9::1", "::ffff:10.1.2.3",
             "::ffff:8.8.8.8", None]  # fmt: skip
PATHS = ["/", "/shop", "/shop/a/b", "/api/v1/health", "/API/v1/health"]
PATH_GLOBS = ["/*", "/shop/*", "/api/*/health", "/shop", "/?hop"]
AGENTS = ["Mozilla/5.0", "Googlebot/2.1", "curl/8.0", ""]
AGENT_GLOBS = ["*bot*", "MOZILLA/*", "curl/?.?"]
NAMES = ["x-a", "X-B"]  # as staff write them; requests have lower-case names
COOKIES = ["s", "S"]
VALUES = ["1", "2"]


def traffic_request(
    address: str | None = "198.51.100.1",
    path: str = "/",
    headers: Mapping[str, str] | None = None,
    cookies: Mapping[str, str] | None = None,
    user_agent: str = "Mozilla/5.0",
) -> TrafficRequest:
    return TrafficRequest(
        address=ipaddress.ip_address(address) if address is not None else None,
        path=path,
        headers=headers or {},
        cookies=cookies or {},
        user_agent=user_agent,
    )


raw_rules = st.lists(
    st.fixed_dictionaries(
        {"action": st.sampled_from(["bypass", "queue", "block"])},
        optional={
            "ip": st.lists(st.sampled_from(NETWORKS), min_size=1, max_size=3),
            "path": st.lists(st.sampled_from(PATH_GLOBS), min_size=1, max_size=2),
            "header": st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES),
                                      min_size=1),
            "cookie": st.dictionaries(st.sampled_from(COOKIES), st.sampled_from(VALUES),
                                      min_size=1),
            "user_agent": st.lists(st.sampled_from(AGENT_GLOBS), min_size=1, max_size=2),
        },
    ).filter(lambda rule: len(rule) > 1),
    max_size=6,
)  # fmt: skip
traffic_requests = st.builds(
    traffic_request,
    address=st.sampled_from(ADDRESSES),
    path=st.sampled_from(PATHS),
    headers=st.dictionaries(st.sampled_from(["x-a", "x-b"]), st.sampled_from(VALUES)),
    cookies=st.dictionaries(st.sampled_from(COOKIES), st.sampled_from(VALUES)),
    user_agent=st.sampled_from(AGENTS),
)
