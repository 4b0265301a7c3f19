"""The client's address for the ``ip`` traffic rules, by the room's own rule for its
``WR_TRUSTED_PROXY_COUNT``: behind N trusted proxies, the address the outermost of them saw,
the N-th entry of ``X-Forwarded-For`` from the right. Entries further left are the client's to
invent, so they never count; without trusted proxies, the header is ignored."""

from __future__ import annotations

import ipaddress

from waitingroom_gate.traffic_rules import Address


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # A bare address only: a zone (fe80::1%eth0) is nothing a proxy of ours writes.
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        return None
    return address


def client_address(remote: str, forwarded_for: str | None, trusted_proxies: int) -> Address | None:
    """The client's address, or None when the peer's is not one (a Unix socket)."""
    if trusted_proxies and forwarded_for is not None:
        # Empty entries are kept: dropping them would shift a value the client wrote into the
        # position our proxies vouch for.
        forwarded = [part.strip() for part in forwarded_for.split(",")]
        if len(forwarded) >= trusted_proxies:
            found = _address(forwarded[-trusted_proxies])
            if found is not None:
                return found
    # Fewer entries than proxies, or no address where a proxy of ours writes one: the peer's
    # (as the room does; a misconfigured proxy then groups its clients under its address).
    return _address(remote)
