"""What the waiting page shows a fan from its socket, worked out as the page does: its place
from the snapshot (tier, order key, the line's tiers), then, every tick, its position from the
tick's checkpoints and its wait from the tick's throughput. The page's script mirrors these
rules (``waiting.js``, pinned to them by tests/queueing/web/test_position_rule_js.py); here the
room's own pure rules are used, so a rehearsal fan is shown what a page would show. Pure."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from queueing.rules.eta import Eta, Throughput, estimate_wait
from queueing.rules.layout import EventLayout, TierLayout, position_in_line, rank_from_checkpoints


@dataclass(frozen=True)
class Place:
    """What a page knows of its own place once its socket's snapshot arrived."""

    tier_id: int
    order_key: int
    layout: EventLayout  # only the tiers, in service order, matter here


@dataclass(frozen=True)
class Shown:
    position: int
    eta: Eta | None  # None while paused: the page shows no wait then


def place_from_snapshot(snapshot: dict[str, Any]) -> Place | None:
    if snapshot.get("tier_id") is None or snapshot.get("order_key") is None:
        return None
    tiers = tuple(
        TierLayout(id=int(t["id"]), priority=0, share=int(t["share"] or 0))
        for t in snapshot.get("tiers") or ()
    )
    layout = EventLayout(event_id=0, slug="", heartbeat_seconds=0, pace=None, tiers=tiers)
    return Place(int(snapshot["tier_id"]), int(snapshot["order_key"]), layout)


def _throughput(data: dict[str, Any] | None) -> Throughput | None:
    if not data:
        return None
    return Throughput(
        lam=float(data["lam"]),
        scv=float(data["scv"]),
        measured=True,
        rel_err=float(data.get("err") or 0.0),
        ranged=bool(data.get("ranged")),
        tier_lams=tuple((int(tier), float(lam)) for tier, lam in (data.get("tiers") or {}).items()),
    )


def shown_in_tick(place: Place, tick: dict[str, Any]) -> Shown | None:
    """The page's position and wait for this tick; None where the tick does not place the fan
    (admitted, or not in this tick yet), when the page asks the server instead."""
    counts = {t["id"]: t["count"] for t in tick["tiers"]}
    mine = next((t for t in tick["tiers"] if t["id"] == place.tier_id), None)
    if mine is None:
        return None
    # The tick's [rank, order key] pairs as they came (ints from JSON): a crowd of fans reads
    # the same tick, so nothing per fan is copied.
    rank = rank_from_checkpoints(mine["checkpoints"], place.order_key)
    if rank is None:
        return None
    position = position_in_line(
        place.layout,
        tier_id=place.tier_id,
        rank_in_tier=rank,
        tier_counts=[counts.get(t.id, 0) for t in place.layout.tiers],
    )
    if tick.get("state") == "paused":
        return Shown(position, None)
    throughput = _throughput(tick.get("throughput"))
    return Shown(position, estimate_wait(position, throughput, place.tier_id))


class MessageReader:
    """Socket messages, parsed. Every page of an on-sale gets the same tick each second: it is
    parsed once (by far the most of what a crowd of sockets receives)."""

    def __init__(self) -> None:
        self._text = ""
        self._parsed: dict[str, Any] = {}
        # Every tick seen, once: (when, its state, its throughput), the pace pages were told.
        self.ticks: list[tuple[float, str, dict[str, Any] | None]] = []

    def read(self, text: str) -> dict[str, Any]:
        if text == self._text:
            return self._parsed
        parsed = json.loads(text)
        if parsed.get("type") == "tick":
            self._text, self._parsed = text, parsed
            self.ticks.append((time.time(), parsed.get("state", ""), parsed.get("throughput")))
        return parsed
