"""Driving a rehearsal over loopback: fans who wait as the waiting page does, a shop that
checks admitted fans out after drawn times and reports it, and staff's live controls.

Every fan is its own identity (no cookie is kept, so each join is a newcomer). Like the
waiting page (``waiting.js``), a fan holds the on-sale's WebSocket and does not poll while it
is open: from its snapshot it knows its tier and order key, and from every tick it works out
its position and wait as the page does (``rehearsal/page.py``, with the room's own rules), and
records each estimate it was shown. It asks the ticket API only when the page would: when a
tick does not place it (let in, or not in the tick yet), when the socket says it is let in
(for its pass), and every few seconds while it has no socket. When the pre-queue's sale
starts, the server sends the page its shuffled place on its socket and the page carries on
in place; one still in the pre-queue 20-30 s later reloads. The shop starts a checkout when
the fan has picked up the pass, draws its length from an exponential distribution, and
reports the outcome with the on-sale's integration key.

Fans that polled besides holding the socket made many more requests than pages do, and in
the surge (2,200 fans) kept this process's one core busy: fans noticed their turn late and
the shop it simulates slowed down (docs/benchmarks.md, session 9).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from rehearsal.page import MessageReader, Place, place_from_snapshot, shown_in_tick
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


def new_client(base_url: str, connections: int = 25) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url,
        cookies=_no_cookies(),
        timeout=httpx.Timeout(30.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


class ClientPool:
    """Several small HTTP clients taken in turn. A client's pool looks at every connection it
    holds for every request (httpcore), so one client of 200 connections spent most of the
    rehearsal's own time there (py-spy, the surge); eight of 25 hold as many for an eighth."""

    def __init__(self, clients: list[httpx.AsyncClient]) -> None:
        self.clients = clients
        self._turn = 0

    @property
    def base_url(self) -> httpx.URL:
        return self.clients[0].base_url

    def next(self) -> httpx.AsyncClient:
        self._turn = (self._turn + 1) % len(self.clients)
        return self.clients[self._turn]

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await self.next().request(method, url, **kwargs)

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.next().post(url, **kwargs)

    async def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.next().patch(url, **kwargs)


@contextlib.asynccontextmanager
async def client_pool(base_url: str, clients: int = 8) -> AsyncIterator[ClientPool]:
    async with contextlib.AsyncExitStack() as stack:
        yield ClientPool(
            [await stack.enter_async_context(new_client(base_url)) for _ in range(clients)]
        )


def _eta(body: dict[str, Any]) -> tuple[float, float, float] | None:
    eta = body.get("eta")
    if not eta:
        return None
    return float(eta["p10"]), float(eta["p50"]), float(eta["p90"])


def _shown(record: FanRecord, status: str, eta: tuple[float, float, float] | None) -> None:
    """What the page shows now: the first range shown in line is the quote that is judged."""
    if status != "waiting" or eta is None:
        return
    now = time.time()
    if record.quote is None:
        record.quote, record.quoted_at = eta, now
    record.shown_p50.append((now, eta[1]))


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
        client: ClientPool,
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
        self.messages = MessageReader()
        # The pages' own timings (reloads, reconnects), apart from the fans' draws above so
        # that who arrives when, in which tier, stays the same from run to run.
        self.page_rng = random.Random(scenario.seed + 2)

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

    async def fan(self, record: FanRecord, plan: TierPlan, leaves_after: float | None) -> None:
        body = {"access_code": plan.code} if plan.code else {}
        response = await self._request("POST", f"/api/v1/events/{self.slug}/join", json=body)
        if response.status_code not in (200, 201):
            record.refused = response.json().get("error", str(response.status_code))
            return
        data = response.json()
        record.ticket = data["ticket"]
        deadline = time.time() + leaves_after if leaves_after is not None else None
        pass_token = await self._wait_turn(record, data, deadline)
        if pass_token is not None:
            record.admitted_seen_at = time.time()
            if await self._shop_visit(pass_token):
                record.checked_out_at = time.time()

    async def _wait_turn(
        self, record: FanRecord, data: dict[str, Any], deadline: float | None
    ) -> str | None:
        """The waiting page's life, from what the server last said (``data``) until the fan
        is let in (its pass) or is out of line (None)."""
        while True:
            status = data["status"]
            record.final_status = status
            if status == "admitted":
                return str(data["pass"])
            if status not in QUEUED:
                return None
            _shown(record, status, _eta(data))
            watched = await self._watch(record, status, deadline)
            if watched == "leave":
                if await self._leave(record):
                    return None
                deadline = None  # let in meanwhile: the server says so next
            elif watched == "offline":
                # Polls keep the place while the page reconnects, 5-10 s later.
                offline_until = time.time() + self.page_rng.uniform(5.0, 10.0)
                answer = await self._poll_until(record, status, offline_until, deadline)
                if answer is not None:
                    data = answer
                    continue
            answer = await self._ticket(record)
            if answer is None:
                return None
            data = answer

    async def _watch(self, record: FanRecord, status: str, deadline: float | None) -> str:
        """Hold the page's socket and show what each tick says, as the page does, until
        something calls for the server: ``"check"`` (let in, or the status changed),
        ``"reload"`` (the pre-queue's sale started long ago and no place came), ``"leave"``
        (the fan gives up) or
        ``"offline"`` (no socket)."""
        base = str(self.client.base_url).rstrip("/")
        url = f"{base.replace('http', 'ws', 1)}/ws/events/{self.slug}/?ticket={record.ticket}"
        place: Place | None = None
        reload_at: float | None = None
        try:
            async with connect(url, origin=base, max_size=None, open_timeout=30) as socket:
                while True:
                    wake = min((t for t in (deadline, reload_at) if t is not None), default=None)
                    try:
                        timeout = None if wake is None else max(0.0, wake - time.time())
                        text = await asyncio.wait_for(socket.recv(), timeout=timeout)
                    except TimeoutError:
                        return "reload" if wake == reload_at else "leave"
                    message = self.messages.read(str(text))
                    kind = message.get("type")
                    if kind == "admitted":
                        return "check"
                    if kind == "snapshot":
                        started = status == "prequeue" and message.get("status") == "waiting"
                        if started and not message.get("redirect_url"):
                            # The sale started: the server sent the page its shuffled place
                            # and the page turns into a waiting page where it is.
                            status = record.final_status = "waiting"
                            reload_at = None
                        elif message.get("redirect_url") or message.get("status") != status:
                            return "check"
                        place = place_from_snapshot(message)
                        _shown(record, status, _eta(message))
                    elif kind == "tick" and status == "prequeue":
                        # The sale started and the place is on its way; a page still in the
                        # pre-queue 20-30 s after its countdown ran out reloads.
                        if message.get("state") != "prequeue" and reload_at is None:
                            reload_at = time.time() + self.page_rng.uniform(20.0, 30.0)
                    elif kind == "tick" and place is not None:
                        shown = shown_in_tick(place, message)
                        if shown is not None:
                            eta = shown.eta
                            _shown(record, status, eta and (eta.p10, eta.p50, eta.p90))
                            continue
                        # The tick does not place the fan (let in, or not in it yet): the
                        # page asks the server once, its socket kept open.
                        answer = await self._ticket(record)
                        if answer is None or answer["status"] != status:
                            return "check"
                        _shown(record, status, _eta(answer))
        except (OSError, TimeoutError, WebSocketException):
            return "offline"

    async def _poll_until(
        self, record: FanRecord, status: str, until: float, deadline: float | None
    ) -> dict[str, Any] | None:
        """A page without its socket polls as ``X-Poll-After-Seconds`` says (at most every
        5 s), until ``until``; the server's answer if it no longer says ``status``."""
        wait = 5.0
        while time.time() + wait < until and (deadline is None or time.time() + wait < deadline):
            await asyncio.sleep(wait)
            response = await self._request("GET", f"/api/v1/tickets/{record.ticket}")
            record.polls += 1
            if response.status_code != 200:
                return {"status": f"error {response.status_code}"}
            data = response.json()
            if data["status"] != status:
                return dict(data)
            _shown(record, status, _eta(data))
            wait = min(5.0, _poll_after(response))
        return None

    async def _ticket(self, record: FanRecord) -> dict[str, Any] | None:
        response = await self._request("GET", f"/api/v1/tickets/{record.ticket}")
        record.polls += 1
        if response.status_code != 200:
            record.final_status = f"error {response.status_code}"
            return None
        return dict(response.json())

    async def _leave(self, record: FanRecord) -> bool:
        left = await self._request("DELETE", f"/api/v1/tickets/{record.ticket}")
        if left.status_code in (200, 204):
            record.left_at = time.time()
            record.final_status = "left"
            return True
        return False

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
