"""The on-sale's traffic rules as the room hands them out (its canonical form, already checked
by the room): compiled once per fetch, then applied to each request, first match wins.

A minimal reading of the room's own evaluator (events/traffic_rules.py in the room), which this
package cannot import; a conformance test in the room runs generated rule lists and requests
through both and requires the same decisions:

- ``ip``: addresses and networks; an IPv4-mapped IPv6 client (``::ffff:a.b.c.d``) is matched
  as the IPv4 address it carries; a rule with ``ip`` never matches a request without an address.
- ``path``: globs over the whole path, case-sensitive; ``*`` crosses ``/``.
- ``header`` (lower-case names) and ``cookie``: exact values.
- ``user_agent``: globs, case-insensitive.
"""

from __future__ import annotations

import bisect
import fnmatch
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BYPASS, QUEUE, BLOCK = "bypass", "queue", "block"
ACTIONS = frozenset({BYPASS, QUEUE, BLOCK})
CONDITIONS = frozenset({"ip", "path", "header", "cookie", "user_agent"})

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class RulesUnreadable(ValueError):
    """The room's answer is not a rule list this gate can apply (kept: the last good one)."""


@dataclass(frozen=True)
class _Ranges:
    """Networks as sorted, disjoint integer ranges: membership is one bisection."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def __contains__(self, number: int) -> bool:
        i = bisect.bisect_right(self.starts, number) - 1
        return i >= 0 and number <= self.ends[i]


def _ranges(networks: list[ipaddress.IPv4Network] | list[ipaddress.IPv6Network]) -> _Ranges:
    merged = list(ipaddress.collapse_addresses(networks))  # type: ignore[arg-type]
    return _Ranges(
        tuple(int(n.network_address) for n in merged),
        tuple(int(n.broadcast_address) for n in merged),
    )


@dataclass(frozen=True)
class TrafficRule:
    action: str
    v4: _Ranges | None = None  # set (maybe empty) when the rule has an ip condition
    v6: _Ranges | None = None
    path: re.Pattern[str] | None = None
    header: tuple[tuple[str, str], ...] | None = None
    cookie: tuple[tuple[str, str], ...] | None = None
    user_agent: re.Pattern[str] | None = None


def _strings(value: object) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise RulesUnreadable("a condition is not a non-empty list of strings")
    return value


def _pairs(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not value:
        raise RulesUnreadable("a header or cookie condition is not a non-empty object")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise RulesUnreadable("a header or cookie condition holds something else than text")
    return tuple(value.items())


def _globs(patterns: list[str], flags: int = 0) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(p) for p in patterns), flags)


def _rule(raw: object) -> TrafficRule:
    if not isinstance(raw, dict) or raw.get("action") not in ACTIONS:
        raise RulesUnreadable("a rule without a known action")
    conditions = set(raw) - {"action"}
    if not conditions or conditions - CONDITIONS:
        raise RulesUnreadable(f"a rule with conditions {sorted(conditions)}")
    v4 = v6 = None
    if "ip" in raw:
        try:
            networks = [ipaddress.ip_network(text) for text in _strings(raw["ip"])]
        except ValueError as error:
            raise RulesUnreadable(str(error)) from error
        v4 = _ranges([n for n in networks if isinstance(n, ipaddress.IPv4Network)])
        v6 = _ranges([n for n in networks if isinstance(n, ipaddress.IPv6Network)])
    return TrafficRule(
        action=raw["action"],
        v4=v4,
        v6=v6,
        path=_globs(_strings(raw["path"])) if "path" in raw else None,
        # Names as the room sends them: headers lower case (requests' are made so), cookies exact.
        header=_pairs(raw["header"]) if "header" in raw else None,
        cookie=_pairs(raw["cookie"]) if "cookie" in raw else None,
        user_agent=_globs(_strings(raw["user_agent"]), re.IGNORECASE)
        if "user_agent" in raw
        else None,
    )


def traffic_rules_compile(raw: object) -> tuple[TrafficRule, ...]:
    """The room's ``traffic_rules`` list, ready to apply; RulesUnreadable for anything else."""
    if not isinstance(raw, list):
        raise RulesUnreadable("traffic_rules is not a list")
    return tuple(_rule(item) for item in raw)


def traffic_action(
    rules: Sequence[TrafficRule],
    *,
    address: Address | None,
    path: str,
    headers: Mapping[str, str],
    cookies: Mapping[str, str],
    user_agent: str,
) -> tuple[str, int | None]:
    """(action, index of the first rule whose every condition matches), else (queue, None).
    ``headers`` has lower-case names."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for index, rule in enumerate(rules):
        if rule.v4 is not None:
            ranges = rule.v4 if isinstance(address, ipaddress.IPv4Address) else rule.v6
            if address is None or ranges is None or int(address) not in ranges:
                continue
        if rule.path is not None and rule.path.match(path) is None:
            continue
        if rule.header is not None and any(headers.get(k) != v for k, v in rule.header):
            continue
        if rule.cookie is not None and any(cookies.get(k) != v for k, v in rule.cookie):
            continue
        if rule.user_agent is not None and rule.user_agent.match(user_agent) is None:
            continue
        return rule.action, index
    return QUEUE, None
