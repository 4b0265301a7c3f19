"""Driving a rehearsal over loopback: fans who join and poll as the waiting page does, a shop
that checks admitted fans out after drawn times and reports it, and staff's live controls.

Every fan is its own identity (no cookie is kept, so each join is a newcomer). Like the
waiting page, a fan holds the on-sale's WebSocket, which tells it at once when it is let in,
and polls the ticket API when ``X-Poll-After-Seconds`` says, recording every estimate it was
shown (the page computes the same figures from the ticks: ``waiting.js`` mirrors
``rules/eta.py``). The shop starts a checkout when the fan has picked up the pass, draws its
length from an exponential distribution, and reports the outcome with the on-sale's
integration key. Without the socket, a fan far back would notice its turn only at its next
poll, up to ten seconds later, and hold the shop's place meanwhile: not what pages do.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from rehearsal.scenarios import Scenario, StaffAction, TierPlan

# Answers a fan retries after a pause instead of giving up (the room shedding load).
RETRY_STATUSES = frozenset({409, 429, 503})
QUEUED = frozenset({"prequeue", "waiting"})


@dataclass
class FanRecord:
    """What one synthetic fan saw, in wall-clock seconds (``time.time()``)."""

    index: int
    tier: str
    prequeue: bool
    arrived_at: float
    ticket: str | None = None
    refused: str | None = None  # the error code of a join the room refused for good
    # The first range the fan was shown while in line (at join, or at the start for the
    # pre-queue), and when: the promise that is judged.
    quote: tuple[float, float, float] | None = None
    quoted_at: float | None = None
    shown_p50: list[tuple[float, float]] = field(default_factory=list)
    admitted_seen_at: float | None = None
    left_at: float | None = None
    checked_out_at: float | None = None  # when the shop reported the checkout done
    final_status: str | None = None
    polls: int = 0


@dataclass
class Shop:
    """The shop behind the room: how long a checkout takes now."""

    mean_seconds: float
    rng: random.Random
    factor: float = 1.0
    completed: int = 0

    def checkout_seconds(self) -> float:
        return self.rng.expovariate(1.0 / (self.mean_seconds * self.factor))


def _no_cookies() -> http.cookiejar.CookieJar:
    # A jar that keeps nothing: every join arrives without the identity cookie.
    return http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


def new_client(base_url: str, connections: int = 200) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url,
        cookies=_no_cookies(),
        timeout=httpx.Timeout(30.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


def _eta(body: dict[str, Any]) -> tuple[float, float, float] | None:
    eta = body.get("eta")
    if not eta:
        return None
    return float(eta["p10"]), float(eta["p50"]), float(eta["p90"])


def _poll_after(response: httpx.Response) -> float:
    try:
        return max(0.5, float(response.headers.get("X-Poll-After-Seconds", "2")))
    except ValueError:
        return 2.0


class Rehearsal:
    """One scenario against one on-sale of a running room."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        client: httpx.AsyncClient,
        slug: str,
        integration_key: str,
        staff_token: str,
        log: Callable[[str], None] = print,
    ) -> None:
        self.scenario = scenario
        self.client = client
        self.slug = slug
        self.integration_key = integration_key
        self.staff_token = staff_token
        self.log = log
        self.rng = random.Random(scenario.seed)
        self.shop = Shop(scenario.checkout_mean_seconds, random.Random(scenario.seed + 1))
        self.fans: list[FanRecord] = []
        self.staff_log: list[tuple[float, str]] = []
        self.checkouts: set[asyncio.Task[None]] = set()

    # -- fans --------------------------------------------------------------------------

    def _tier_for(self) -> TierPlan:
        plans = self.scenario.tiers
        pick = self.rng.random() * sum(t.fraction for t in plans)
        for plan in plans:
            pick -= plan.fraction
            if pick <= 0:
                return plan
        return plans[-1]

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(20):
            try:
                response = await self.client.request(method, url, **kwargs)
            except httpx.TransportError:
                await asyncio.sleep(0.5 + attempt * 0.25)
                continue
            if response.status_code not in RETRY_STATUSES:
                return response
            retry = float(response.headers.get("Retry-After", "1") or 1)
            await asyncio.sleep(min(5.0, retry))
        return response

    async def _socket(self, ticket: str, admitted: asyncio.Event) -> None:
        """The page's socket: only its ``admitted`` message matters here."""
        base = str(self.client.base_url).rstrip("/")
        url = f"{base.replace('http', 'ws', 1)}/ws/events/{self.slug}/?ticket={ticket}"
        try:
            async with connect(url, origin=base, max_size=None, open_timeout=30) as socket:
                async for message in socket:
                    if isinstance(message, str) and '"admitted"' in message[:40]:
                        admitted.set()
                        return
        except (OSError, TimeoutError, WebSocketException):
            return  # the fan goes on polling, as the page does

    async def fan(self, record: FanRecord, plan: TierPlan, leaves_after: float | None) -> None:
        body = {"access_code": plan.code} if plan.code else {}
        response = await self._request("POST", f"/api/v1/events/{self.slug}/join", json=body)
        if response.status_code not in (200, 201):
            record.refused = response.json().get("error", str(response.status_code))
            return
        data = response.json()
        record.ticket = data["ticket"]
        admitted = asyncio.Event()
        socket = asyncio.create_task(self._socket(record.ticket, admitted))
        try:
            await self._follow(record, response, data, leaves_after, admitted)
        finally:
            socket.cancel()

    async def _follow(
        self,
        record: FanRecord,
        response: httpx.Response,
        data: dict[str, Any],
        leaves_after: float | None,
        admitted: asyncio.Event,
    ) -> None:
        started = time.time()
        while True:
            now = time.time()
            status = data["status"]
            record.final_status = status
            if status in QUEUED:
                eta = _eta(data)
                if eta is not None:
                    if record.quote is None:
                        record.quote, record.quoted_at = eta, now
                    record.shown_p50.append((now, eta[1]))
            elif status == "admitted":
                record.admitted_seen_at = now
                if await self._shop_visit(data["pass"]):
                    record.checked_out_at = time.time()
                return
            else:
                return
            # Told it is in (by the socket) a moment before this answer knew: ask again soon.
            wait = 0.2 if admitted.is_set() else _poll_after(response)
            if leaves_after is not None and now + wait >= started + leaves_after:
                await asyncio.sleep(max(0.0, started + leaves_after - now))
                left = await self._request("DELETE", f"/api/v1/tickets/{record.ticket}")
                if left.status_code in (200, 204):
                    record.left_at = time.time()
                    record.final_status = "left"
                    return
                leaves_after = None  # admitted meanwhile: the next poll says so
                continue
            if admitted.is_set():
                await asyncio.sleep(wait)
            else:
                try:
                    await asyncio.wait_for(admitted.wait(), timeout=wait)
                except TimeoutError:
                    pass
            response = await self._request("GET", f"/api/v1/tickets/{record.ticket}")
            record.polls += 1
            if response.status_code != 200:
                record.final_status = f"error {response.status_code}"
                return
            data = response.json()

    async def _shop_visit(self, pass_token: str) -> bool:
        await asyncio.sleep(self.shop.checkout_seconds())
        response = await self._request(
            "POST",
            "/api/v1/passes/complete",
            json={"pass": pass_token, "outcome": "completed"},
            headers={"Authorization": f"Bearer {self.integration_key}"},
        )
        if response.status_code == 204:
            self.shop.completed += 1
            return True
        return False

    def _spawn(self, prequeue: bool, arrived_at: float, tasks: list[asyncio.Task[None]]) -> None:
        plan = self._tier_for() if not prequeue else self.scenario.tiers[-1]
        record = FanRecord(len(self.fans), plan.name, prequeue, arrived_at)
        self.fans.append(record)
        leaves_after = None
        if self.rng.random() < self.scenario.abandon_share:
            leaves_after = self.rng.uniform(3.0, 30.0)
        tasks.append(asyncio.create_task(self.fan(record, plan, leaves_after)))

    async def prequeue(self, tasks: list[asyncio.Task[None]]) -> None:
        """The pre-queue cohort, joined as fast as the room takes them (before the start)."""
        for _ in range(self.scenario.prequeue_fans):
            self._spawn(True, time.time(), tasks)
            await asyncio.sleep(0.002)

    async def arrivals(self, tasks: list[asyncio.Task[None]]) -> None:
        for _ in range(self.scenario.fans):
            await asyncio.sleep(self.rng.expovariate(self.scenario.arrivals_per_second))
            self._spawn(False, time.time(), tasks)

    # -- staff ---------------------------------------------------------------------------

    async def staff(self, started: float) -> None:
        for action in sorted(self.scenario.actions, key=lambda a: a.at):
            await asyncio.sleep(max(0.0, started + action.at - time.time()))
            await self._act(action)
            self.staff_log.append((time.time(), _describe(action)))
            self.log(f"  staff at {time.time() - started:5.1f} s: {_describe(action)}")

    async def _act(self, action: StaffAction) -> None:
        if action.kind == "checkout_factor":
            self.shop.factor = action.factor
            return
        headers = {"Authorization": f"Token {self.staff_token}"}
        base = f"/api/v1/manage/events/{self.slug}/"
        if action.kind in ("pause", "resume"):
            response = await self.client.post(base + action.kind, headers=headers)
        else:
            changes = {
                key: value
                for key, value in (
                    ("capacity", action.capacity),
                    ("rate_per_minute", action.rate_per_minute),
                )
                if value is not None
            }
            response = await self.client.patch(base, json=changes, headers=headers)
        response.raise_for_status()

    # -- the whole run ---------------------------------------------------------------------

    async def run(self, *, line_started: Callable[[], Any]) -> float:
        """Fans (pre-queue first, then the start, then arrivals), the shop and staff, until
        every fan is done or the time limit. ``line_started`` waits until the line moves and
        returns; the returned value is the wall-clock start of the arrivals."""
        tasks: list[asyncio.Task[None]] = []
        await self.prequeue(tasks)
        await line_started()
        started = time.time()
        staff = asyncio.create_task(self.staff(started))
        await self.arrivals(tasks)
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=self.scenario.time_limit_seconds)
        except TimeoutError:
            self.log(f"  time limit reached: {sum(not t.done() for t in tasks)} fans still out")
            for task in tasks:
                task.cancel()
        staff.cancel()
        return started


def _describe(action: StaffAction) -> str:
    if action.kind == "checkout_factor":
        return f"the shop's checkouts now take ×{action.factor:g}"
    if action.kind == "set":
        parts = []
        if action.capacity is not None:
            parts.append(f"capacity {action.capacity}")
        if action.rate_per_minute is not None:
            parts.append(f"rate {action.rate_per_minute}/min")
        return "set " + ", ".join(parts)
    return action.kind
