"""An on-sale's traffic rules, checked and applied without any I/O: which requests go straight
to the shop (``bypass``), which wait their turn (``queue``, also what happens when no rule
matches) and which are refused (``block``). Staff give a JSON list, evaluated in order, first
match wins; every condition of a rule must match:

- ``ip``: addresses and networks, IPv4 and IPv6; an IPv4-mapped IPv6 client (``::ffff:a.b.c.d``)
  is matched as the IPv4 address it carries. A network with host bits set (``10.0.0.1/8``) is
  refused rather than silently widened: it is most often a typo for one address.
- ``path``: globs over the URL path (no query string), case-sensitive as paths are; ``*`` crosses
  ``/`` (``/shop/*`` covers ``/shop/a/b``), ``?`` is one character, ``[...]`` a set.
- ``header`` and ``cookie``: name → exact value; header names are case-insensitive.
- ``user_agent``: globs, case-insensitive.

Here are the three uses the layers above share: ``parse_traffic_rules`` (what model validation and
the staff API refuse, with messages addressed to the field), ``traffic_decision`` (the gates' hot
path: the globs and networks are compiled at parse time, so a rule costs a few dict lookups, a
bisection and a regex match) and ``traffic_rules_json`` (the canonical form stored and shown
back; parsing it gives the same rules). Messages number rules from 1, as staff count them; a
decision's ``rule`` is the list index (from 0), for metrics and logs.

Over 350 lines on purpose: every refusal with its message sits beside the rule it guards.
"""

from __future__ import annotations

import bisect
import fnmatch
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from events.validation import is_storable_text

# Caps that keep a rule list something a person wrote and a gate can hold in memory.
TRAFFIC_RULES_MAX = 100
ENTRIES_MAX = 1_000  # per condition: addresses, globs, headers or cookies
TEXT_MAX_LENGTH = 512  # any one address, glob, name or value
# More messages than this say nothing more to staff: the rest are counted instead.
MESSAGES_MAX = 20

CONDITIONS = ("ip", "path", "header", "cookie", "user_agent")
# An HTTP token (RFC 9110 5.6.2): a header or cookie name outside it can never be sent.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

T = TypeVar("T")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# The IPv4-mapped IPv6 block (RFC 4291 2.5.5.2): a dual-stack socket reports IPv4 clients in it.
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


class TrafficAction(StrEnum):
    BYPASS = "bypass"  # straight to the shop, no pass needed
    QUEUE = "queue"  # the normal path
    BLOCK = "block"  # refused (403)


class TrafficRulesError(ValueError):
    """What is wrong with a rule list, one message per fault, each naming the rule and entry."""

    field_name = "traffic_rules"

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = tuple(messages)
        super().__init__("; ".join(self.messages))

    def fields(self) -> dict[str, list[str]]:
        """The field errors, shaped as the staff API's ``fields`` and Django's error dict."""
        return {self.field_name: list(self.messages)}


@dataclass(frozen=True)
class _Ranges:
    """Networks of one IP version as sorted, disjoint integer ranges: membership is one
    bisection, however many networks staff listed."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    @classmethod
    def of(cls, networks: Iterable[Network]) -> _Ranges:
        merged = list(ipaddress.collapse_addresses(networks))  # sorted and disjoint
        return cls(
            tuple(int(n.network_address) for n in merged),
            tuple(int(n.broadcast_address) for n in merged),
        )

    def __contains__(self, number: int) -> bool:
        i = bisect.bisect_right(self.starts, number) - 1
        return i >= 0 and number <= self.ends[i]


def _globs(patterns: Sequence[str], flags: int = 0) -> re.Pattern[str]:
    # One alternation for the whole list: one match call per condition, not one per glob.
    return re.compile("|".join(fnmatch.translate(p) for p in patterns), flags)


@dataclass(frozen=True, slots=True)
class TrafficRule:
    """One rule in its canonical form; the compiled matchers beside it take no part in
    equality, so two rules are equal when their canonical forms are."""

    action: TrafficAction
    ip: tuple[Network, ...] | None = None
    path: tuple[str, ...] | None = None
    header: tuple[tuple[str, str], ...] | None = None  # lower-case names, sorted
    cookie: tuple[tuple[str, str], ...] | None = None  # sorted by name
    user_agent: tuple[str, ...] | None = None
    _v4: _Ranges | None = field(default=None, compare=False, repr=False)
    _v6: _Ranges | None = field(default=None, compare=False, repr=False)
    _path: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    _user_agent: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        action: TrafficAction,
        *,
        ip: tuple[Network, ...] | None = None,
        path: tuple[str, ...] | None = None,
        header: tuple[tuple[str, str], ...] | None = None,
        cookie: tuple[tuple[str, str], ...] | None = None,
        user_agent: tuple[str, ...] | None = None,
    ) -> TrafficRule:
        """A rule from checked, canonical parts, with its matchers compiled."""
        return cls(
            action=action,
            ip=ip,
            path=path,
            header=header,
            cookie=cookie,
            user_agent=user_agent,
            _v4=_Ranges.of(n for n in ip if n.version == 4) if ip else None,
            _v6=_Ranges.of(n for n in ip if n.version == 6) if ip else None,
            _path=_globs(path) if path else None,
            _user_agent=_globs(user_agent, re.IGNORECASE) if user_agent else None,
        )


@dataclass(frozen=True)
class TrafficRequest:
    """What the gate knows of a request. ``headers`` has lower-case names (repeated headers
    joined as the server joins them); ``path`` is the URL path without the query string;
    ``address`` is None when the gate does not know the client's."""

    address: Address | None
    path: str
    headers: Mapping[str, str]
    cookies: Mapping[str, str]
    user_agent: str


@dataclass(frozen=True)
class TrafficDecision:
    action: TrafficAction
    rule: int | None  # index of the matching rule in the list; None: no rule matched


DEFAULT_DECISION = TrafficDecision(TrafficAction.QUEUE, None)


def traffic_decision(rules: Sequence[TrafficRule], request: TrafficRequest) -> TrafficDecision:
    """The first rule whose every condition matches ``request``, else ``queue``."""
    if not rules:
        return DEFAULT_DECISION
    # The address once per request, not once per rule: an IPv4 client reaching a dual-stack
    # socket arrives as ::ffff:a.b.c.d and must meet the IPv4 rules.
    address = request.address
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    number = int(address) if address is not None else 0
    version = address.version if address is not None else 0
    for index, rule in enumerate(rules):
        # Cheapest conditions first; all must match, so the order changes nothing else.
        if rule.header is not None and not all(
            request.headers.get(name) == value for name, value in rule.header
        ):
            continue
        if rule.cookie is not None and not all(
            request.cookies.get(name) == value for name, value in rule.cookie
        ):
            continue
        if rule.ip is not None:
            ranges = rule._v4 if version == 4 else rule._v6 if version == 6 else None
            if ranges is None or number not in ranges:
                continue
        if rule._path is not None and rule._path.match(request.path) is None:
            continue
        if rule._user_agent is not None and rule._user_agent.match(request.user_agent) is None:
            continue
        return TrafficDecision(rule.action, index)
    return DEFAULT_DECISION


# ------------------------------------------------------------------- the canonical form


def _network_text(network: Network) -> str:
    # One address reads as an address, as staff most often write it.
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def traffic_rules_json(rules: Iterable[TrafficRule]) -> list[dict[str, object]]:
    """The rules as JSON to store and show back: networks normalised (``2001:DB8::/32`` →
    ``2001:db8::/32``, ``10.0.0.7/32`` → ``10.0.0.7``), header names lower case, duplicates
    dropped, keys in one order. ``parse_traffic_rules`` of it gives the same rules."""
    out: list[dict[str, object]] = []
    for rule in rules:
        item: dict[str, object] = {"action": rule.action.value}
        if rule.ip is not None:
            item["ip"] = [_network_text(n) for n in rule.ip]
        if rule.path is not None:
            item["path"] = list(rule.path)
        if rule.header is not None:
            item["header"] = dict(rule.header)
        if rule.cookie is not None:
            item["cookie"] = dict(rule.cookie)
        if rule.user_agent is not None:
            item["user_agent"] = list(rule.user_agent)
        out.append(item)
    return out


# ---------------------------------------------------------------------------- parsing


def _quote(value: object) -> str:
    """``value`` as staff typed it, in JSON (strings quoted, control characters escaped),
    cut short: a message names the entry, it does not echo a kilobyte back."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) <= 60:
        return text
    return text[:56] + ('..."' if isinstance(value, str) else "...")


class _Faults:
    """The messages of one parse, counted past MESSAGES_MAX rather than kept."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.dropped = 0

    def add(self, message: str) -> None:
        if len(self.messages) < MESSAGES_MAX:
            self.messages.append(message)
        else:
            self.dropped += 1

    def raise_any(self) -> None:
        if self.dropped:
            self.messages.append(f"... and {self.dropped} more.")
        if self.messages:
            raise TrafficRulesError(self.messages)


def _text(where: str, what: str, value: object, faults: _Faults) -> str | None:
    """``value`` if it is a string staff could mean and PostgreSQL can store, else None."""
    if not isinstance(value, str):
        faults.add(f"{where}: {what} {_quote(value)} is not a string.")
        return None
    if not value:
        faults.add(f"{where}: {what} is empty.")
        return None
    if len(value) > TEXT_MAX_LENGTH:
        faults.add(f"{where}: {what} {_quote(value)} is over {TEXT_MAX_LENGTH} characters.")
        return None
    if not is_storable_text(value):
        faults.add(f"{where}: {what} {_quote(value)} holds a character that cannot be stored.")
        return None
    return value


def _sized(where: str, key: str, raw: object, kind: type, faults: _Faults) -> bool:
    """Whether condition ``key`` is a non-empty ``kind`` (list or dict) within the cap."""
    shape = "list" if kind is list else "object"
    if not isinstance(raw, kind):
        faults.add(f"{where}: {key} must be a {shape}.")
        return False
    if not raw:
        faults.add(f"{where}: {key} is an empty {shape}; leave it out to match any request.")
        return False
    if len(raw) > ENTRIES_MAX:
        faults.add(f"{where}: {key} has {len(raw)} entries; at most {ENTRIES_MAX}.")
        return False
    return True


def _network(where: str, raw: object, faults: _Faults) -> Network | None:
    text = _text(where, "address", raw, faults)
    if text is None:
        return None
    try:
        network: Network = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError:
        try:
            wide = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            faults.add(f"{where}: {_quote(text)} is not an address or network.")
            return None
        faults.add(
            f"{where}: {_quote(text)} has host bits set (did you mean the network "
            f"{_quote(str(wide))}, or the one address {_quote(text.split('/')[0].strip())}?)."
        )
        return None
    # An IPv4-mapped network in a rule means the IPv4 one: clients are matched as IPv4.
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        mapped = network.network_address.ipv4_mapped
        assert mapped is not None  # inside ::ffff:0:0/96
        network = ipaddress.IPv4Network((mapped, network.prefixlen - 96))
    return network


def _unique(items: Iterable[T]) -> tuple[T, ...]:
    # Duplicates dropped, first kept: the canonical form, and one alternative fewer to try.
    return tuple(dict.fromkeys(items))


def _networks(where: str, raw: object, faults: _Faults) -> tuple[Network, ...] | None:
    if not _sized(where, "ip", raw, list, faults):
        return None
    assert isinstance(raw, list)
    found = [_network(where, entry, faults) for entry in raw]
    networks = [n for n in found if n is not None]
    return _unique(networks) if len(networks) == len(found) else None


def _patterns(where: str, key: str, raw: object, faults: _Faults) -> tuple[str, ...] | None:
    if not _sized(where, key, raw, list, faults):
        return None
    assert isinstance(raw, list)
    found = [_text(where, "pattern", entry, faults) for entry in raw]
    patterns = [p for p in found if p is not None]
    if len(patterns) < len(found):
        return None
    if key == "path":
        relative = [p for p in patterns if not p.startswith("/")]
        if relative:
            faults.add(
                f"{where}: path {_quote(relative[0])} does not start with /; a path always does."
            )
            return None
    return _unique(patterns)


def _pairs(
    where: str, key: str, raw: object, faults: _Faults
) -> tuple[tuple[str, str], ...] | None:
    if not _sized(where, key, raw, dict, faults):
        return None
    assert isinstance(raw, dict)
    pairs: dict[str, str] = {}
    ok = True
    for raw_name, raw_value in raw.items():
        name = _text(where, f"{key} name", raw_name, faults)
        value = _text(where, f"{key} {_quote(raw_name)}", raw_value, faults)
        if name is None or value is None:
            ok = False
            continue
        if not _TOKEN.match(name):
            faults.add(f"{where}: {key} name {_quote(name)} is not a valid {key} name.")
            ok = False
            continue
        # Header names are case-insensitive (HTTP); cookie names are not (RFC 6265).
        if key == "header":
            name = name.lower()
        if name in pairs:
            faults.add(f"{where}: {key} {_quote(name)} is given twice.")
            ok = False
            continue
        pairs[name] = value
    return tuple(sorted(pairs.items())) if ok else None


def _rule(number: int, raw: object, faults: _Faults) -> TrafficRule | None:
    where = f"rule {number}"
    if not isinstance(raw, dict):
        faults.add(f"{where}: a rule must be an object with an action and its conditions.")
        return None
    unknown = [key for key in raw if key != "action" and key not in CONDITIONS]
    for key in unknown:
        faults.add(
            f"{where}: unknown key {_quote(key)} (a rule has an action and any of "
            f"{', '.join(CONDITIONS)})."
        )
    action: TrafficAction | None = None
    if "action" not in raw:
        faults.add(f"{where}: needs an action (bypass, queue or block).")
    elif raw["action"] not in tuple(TrafficAction):
        faults.add(f"{where}: unknown action {_quote(raw['action'])} (bypass, queue or block).")
    else:
        action = TrafficAction(raw["action"])
    if not any(key in raw for key in CONDITIONS):
        faults.add(f"{where}: a rule needs at least one condition ({', '.join(CONDITIONS)}).")
        return None
    ip = _networks(where, raw["ip"], faults) if "ip" in raw else None
    path = _patterns(where, "path", raw["path"], faults) if "path" in raw else None
    header = _pairs(where, "header", raw["header"], faults) if "header" in raw else None
    cookie = _pairs(where, "cookie", raw["cookie"], faults) if "cookie" in raw else None
    agents = raw.get("user_agent")
    user_agent = _patterns(where, "user_agent", agents, faults) if "user_agent" in raw else None
    given = {"ip": ip, "path": path, "header": header, "cookie": cookie, "user_agent": user_agent}
    # A condition given but refused leaves None: the rule is not built (its faults are told).
    if action is None or unknown or any(given[key] is None for key in CONDITIONS if key in raw):
        return None
    return TrafficRule.build(
        action, ip=ip, path=path, header=header, cookie=cookie, user_agent=user_agent
    )


def parse_traffic_rules(raw: object) -> tuple[TrafficRule, ...]:
    """``raw`` (decoded JSON) as rules, or ``TrafficRulesError`` with every fault found
    (up to MESSAGES_MAX), each message naming the rule (from 1) and the entry. None and
    an empty list are no rules: everyone queues."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise TrafficRulesError(["Traffic rules must be a list of rules."])
    if len(raw) > TRAFFIC_RULES_MAX:
        raise TrafficRulesError(
            [f"{len(raw)} traffic rules; an on-sale may have at most {TRAFFIC_RULES_MAX}."]
        )
    faults = _Faults()
    rules = [_rule(number, item, faults) for number, item in enumerate(raw, start=1)]
    faults.raise_any()
    return tuple(rule for rule in rules if rule is not None)
