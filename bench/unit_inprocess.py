"""The in-process part of bench/unit_costs.py: the line's own functions called directly (no
HTTP, no load generator), so that one call's statements and time can be counted exactly.

- join batches of several sizes: statements, wall time, and how long the on-sale's audit chain
  head is held (from its `SELECT ... FOR UPDATE` to the commit): that lock serialises every
  join of one on-sale, so its hold time per batch is the structural ceiling of joins/s;
- join parts: batches of one connection, one after another, for a few seconds at each size:
  the PostgreSQL backend's CPU per join (a web process's batch splits into one part per
  lane, and with many lanes and many web processes the parts are small);
- an admission of 500 (the tick's batch limit, `WR_ADMISSION_BATCH`): time, statements, hold;
- pass hand-overs through Django (the admitted fan's page asking for its ticket);
- the once-a-second dispatch (`tasks.room_tick`): time per on-sale sent a tick;
- a new identity drawn in the batch's lane (`identity_from_request` in `newcomers_batch()`):
  the web CPU per identity by the on-sale's lanes (about ``lanes`` candidates are hashed);
- a laned line's join views (`join_views`): a join part's fans counted in every other lane
  and their views kept in their own, by part size and lanes: the web thread's CPU, each
  script's Redis CPU, a view key's bytes.

Imported by bench/unit_costs.py once Django is set up on its own database and Redis.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from bench.box_office import pids_cpu_seconds
from bench.meters import RedisReading, per, redis_spent, spread
from events.models import Event
from queueing.line.admission import ManualAdmission, admission_run
from queueing.line.joining import JoinRequest, entry_join_many
from queueing.models import AuditChainHead, AuditLaneHead, QueueEntry
from queueing.rules.ticket_codec import TicketRef, ticket_issue
from queueing.tasks import room_tick


class SqlCounter:
    """A Django execute wrapper: statements sent, and the audit chain head's lock, taken by a
    `SELECT ... FOR UPDATE` of its row and released by the commit (an on-commit hook)."""

    def __init__(self) -> None:
        self.statements = 0
        self.under_lock = 0
        self.locked_at: float | None = None
        self.held_s = 0.0
        self._head = AuditChainHead._meta.db_table

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        self.statements += 1
        if self.locked_at is None and "FOR UPDATE" in sql and self._head in sql:
            self.locked_at = time.perf_counter()
            transaction.on_commit(self._released)
        if self.locked_at is not None:
            self.under_lock += 1
        return execute(sql, *args)

    def _released(self) -> None:
        assert self.locked_at is not None
        self.held_s = time.perf_counter() - self.locked_at


def _counted(call: Callable[[], Any]) -> tuple[Any, SqlCounter, float]:
    counter = SqlCounter()
    started = time.perf_counter()
    with connection.execute_wrapper(counter):
        result = call()
    return result, counter, time.perf_counter() - started


def join_batches(
    event_id: int, sizes: tuple[int, ...], runs: int, redis_reading: Callable[[], RedisReading]
) -> dict[str, Any]:
    """One transaction per batch, as the lean join path commits them. Without the join limits
    (they run before, per request): the Redis work here is all on the on-sale's own keys."""
    out: dict[str, Any] = {}
    for size in sizes:
        wall, held, statements, under_lock, redis_us = [], [], [], [], []
        for _ in range(runs):
            event = Event.objects.get(pk=event_id)
            now = timezone.now()
            requests = [
                JoinRequest(
                    event=event,
                    identity=hashlib.sha256(uuid.uuid4().bytes).hexdigest(),
                    access_code=None,
                    now=now,
                )
                for _ in range(size)
            ]
            before = redis_reading()
            outcomes, counter, seconds = _counted(lambda r=requests: entry_join_many(r))
            calls, redis_cpu = redis_spent(before, redis_reading())
            redis_us.append(redis_cpu * 1e6 / size)
            assert all(not isinstance(o, Exception) for o in outcomes), outcomes[:3]
            wall.append(seconds * 1000)
            held.append(counter.held_s * 1000)
            # The commit is a round trip too, under the lock, and so is the audit records'
            # COPY, which Django's execute wrappers do not see (records/bulk_insert.py).
            statements.append(counter.statements + 2)
            under_lock.append(counter.under_lock + 2)
        out[str(size)] = {
            "wall_ms": spread(wall),
            "chain_head_held_ms": spread(held),
            "round_trips": spread(statements, 0),
            "round_trips_under_lock": spread(under_lock, 0),
            "redis_cpu_us_per_join": spread(redis_us),
            "redis_commands_per_join": per(calls, size),
        }
    return out


def join_parts(event_id: int, sizes: tuple[int, ...], *, seconds: float = 3.0) -> dict[str, Any]:
    """Batches of each size committed one after another on this process's connection for
    ``seconds``, as a web process commits its batches' parts: the wall time per part, the
    CPU of this connection's PostgreSQL backend per join (from /proc, so the server must run
    on this machine) and this thread's own (what a web process's batch thread spends on a
    part: Django, the records' hashes, the Redis client). Per batch the backend's CPU is too
    short for /proc's clock ticks, hence seconds of them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    out: dict[str, Any] = {}
    for size in sizes:
        parts = joined = 0
        cpu_before, started = pids_cpu_seconds([backend]), time.perf_counter()
        thread_before = time.thread_time()
        while time.perf_counter() - started < seconds:
            event, now = Event.objects.get(pk=event_id), timezone.now()
            outcomes = entry_join_many(
                [
                    JoinRequest(
                        event=event,
                        identity=hashlib.sha256(uuid.uuid4().bytes).hexdigest(),
                        access_code=None,
                        now=now,
                    )
                    for _ in range(size)
                ]
            )
            assert all(not isinstance(o, Exception) for o in outcomes), outcomes[:3]
            parts, joined = parts + 1, joined + size
        elapsed = time.perf_counter() - started
        thread = time.thread_time() - thread_before
        cpu = pids_cpu_seconds([backend]) - cpu_before
        out[str(size)] = {
            "parts": parts,
            "wall_ms_per_part": round(elapsed * 1000 / parts, 3),
            "postgresql_cpu_ms_per_join": round(cpu * 1000 / joined, 4),
            "postgresql_cpu_ms_per_part": round(cpu * 1000 / parts, 3),
            "thread_cpu_ms_per_join": round(thread * 1000 / joined, 4),
        }
        print(f"   parts of {size}: {out[str(size)]}", flush=True)
    return out


def admissions(event_id: int, count: int, runs: int) -> dict[str, Any]:
    """Staff's "admit N now" runs the tick's admission code with a fixed batch (run.py's
    admission row does the same)."""
    wall, held, statements = [], [], []
    for _ in range(runs):
        batch = ManualAdmission(count=count, actor="units")
        outcome, counter, seconds = _counted(
            lambda b=batch: admission_run(event_id=event_id, now=timezone.now(), manual=b)
        )
        assert len(outcome.admitted) == count, outcome
        wall.append(seconds * 1000)
        held.append(counter.held_s * 1000)
        statements.append(counter.statements + 2)  # the commit, and the records' COPY
    return {
        "fans": count,
        "wall_ms": spread(wall),
        "chain_head_held_ms": spread(held),
        "round_trips": spread(statements, 0),
    }


def pass_handovers(event_id: int, count: int) -> dict[str, Any]:
    """An admitted fan's page asks for its ticket once more: Django (not the lean path) signs
    the pass and records the hand-over. Wall time in this one thread, so about its CPU."""
    rows = QueueEntry.objects.filter(
        event_id=event_id, status="admitted", pass_issued_at__isnull=True
    ).values_list("id", "tier_id")[:count]
    tickets = [ticket_issue(TicketRef(entry_id=i, event_id=event_id, tier_id=t)) for i, t in rows]
    client = Client(HTTP_HOST="127.0.0.1")
    times = []
    for ticket in tickets:
        started = time.perf_counter()
        response = client.get(f"/api/v1/tickets/{ticket}")
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and response.json()["pass"], response.content[:200]
    return {"handovers": len(times), "wall_ms_each": spread(times)}


def dispatches(runs: int, clear_claims: Callable[[], None]) -> dict[str, Any]:
    """The beat's once-a-second task, run here: find the on-sales with work, claim their
    ticks, send each its message (to the broker; no worker takes them)."""
    per_on_sale, sent = [], []
    for _ in range(runs):
        clear_claims()  # or the last run's claims would hold every tick back
        started = time.perf_counter()
        count = room_tick()
        seconds = time.perf_counter() - started
        sent.append(count)
        per_on_sale.append(seconds * 1000 / count)
    return {"on_sales": spread(sent, 0), "ms_per_on_sale": spread(per_on_sale)}


class _LaneHeadHold:
    """Like ``SqlCounter``'s hold, for whichever chain head a thread's join batch locks: its
    lane's (``AuditLaneHead``) or, in a line of one lane, the on-sale's."""

    def __init__(self) -> None:
        self.held_s: list[float] = []
        self._locked_at: float | None = None
        self._tables = (AuditChainHead._meta.db_table, AuditLaneHead._meta.db_table)

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if (
            self._locked_at is None
            and "FOR UPDATE" in sql
            and any(table in sql for table in self._tables)
        ):
            self._locked_at = time.perf_counter()
            transaction.on_commit(self._released)
        return execute(sql, *args)

    def _released(self) -> None:
        assert self._locked_at is not None
        self.held_s.append(time.perf_counter() - self._locked_at)
        self._locked_at = None


def lane_joins(
    make_on_sale: Callable[[str, int], Event],
    lane_counts: tuple[int, ...] = (1, 2, 4, 8),
    *,
    batch: int = 200,
    seconds: float = 4.0,
) -> dict[str, Any]:
    """Joins of one on-sale with 1, 2, 4 and 8 lanes: one thread per lane (its own database
    connection), each committing batches of ``batch`` fans of its own lane, as the web
    processes' batches of that lane would, for ``seconds``. The measured joins/s is what
    this machine's cores allow; the chain heads' holds give the ceiling the locks alone
    allow, ``lanes x batch / hold``: what each lane adds once cores are not the bound."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    from queueing.rules.lanes import lane_of

    out: dict[str, Any] = {}
    for lanes in lane_counts:
        event = make_on_sale(f"lanes-{lanes}", lanes)
        # Identities sorted into lanes beforehand: drawing them is not the join's work.
        pools: dict[int, list[str]] = {lane: [] for lane in range(lanes)}
        wanted = batch * 400
        while min(len(p) for p in pools.values()) < wanted // lanes:
            identity = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
            pool = pools[lane_of(identity, lanes=lanes)]
            if len(pool) < wanted // lanes:
                pool.append(identity)
        deadline = time.perf_counter() + seconds

        def run(
            lane: int,
            event_id: int = event.pk,
            pools: dict[int, list[str]] = pools,
            deadline: float = deadline,
        ) -> tuple[int, list[float]]:
            hold, joined, identities = _LaneHeadHold(), 0, pools[lane]
            try:
                with connection.execute_wrapper(hold):
                    while time.perf_counter() < deadline and identities:
                        fresh = Event.objects.get(pk=event_id)
                        now = timezone.now()
                        chunk, identities[:batch] = identities[:batch], []
                        outcomes = entry_join_many(
                            [
                                JoinRequest(event=fresh, identity=i, access_code=None, now=now)
                                for i in chunk
                            ]
                        )
                        assert all(not isinstance(o, Exception) for o in outcomes), outcomes[:3]
                        joined += len(chunk)
            finally:
                connections.close_all()
            return joined, hold.held_s

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=lanes) as pool:
            results = list(pool.map(run, range(lanes)))
        elapsed = time.perf_counter() - started
        holds = [h * 1000 for _, held in results for h in held]
        joined = sum(n for n, _ in results)
        median_hold = spread(holds)["median"]
        out[str(lanes)] = {
            "joins_per_second": round(joined / elapsed),
            "chain_head_held_ms": spread(holds),
            "lock_ceiling_joins_per_second": round(lanes * batch * 1000 / median_hold),
        }
        print(f"   {lanes} lane(s): {out[str(lanes)]}", flush=True)
    return out


def identity_draws(
    lane_counts: tuple[int, ...] = (1, 8, 32, 64), *, identities: int = 3_000, runs: int = 3
) -> dict[str, Any]:
    """The web CPU a join without any identity spends on the new one: in a laned on-sale it
    is drawn so that its lane is the batch's newcomers' (queueing/web/callers.py), trying
    candidates until one falls in that lane, about ``lanes`` of them (a sha256 and an HMAC
    each). ``identities`` drawn per run, each from a bare POST, inside ``newcomers_batch()``
    as the batch thread does (a new batch, hence a new lane, every 200 as a full part would
    have). This thread's CPU time, so the shared machine's other work is not counted."""
    from django.test import RequestFactory

    from queueing.web.callers import identity_from_request, newcomers_batch

    factory = RequestFactory()
    out: dict[str, Any] = {}
    for lanes in lane_counts:
        per_identity = []
        for _ in range(runs):
            requests = [factory.post("/") for _ in range(identities)]  # not the draw's work
            started = time.thread_time()
            for first in range(0, identities, 200):
                with newcomers_batch():
                    for request in requests[first : first + 200]:
                        identity_from_request(request, lanes=lanes)
            per_identity.append((time.thread_time() - started) * 1e6 / identities)
        out[str(lanes)] = {
            "identities": identities,
            "web_cpu_us_per_identity": spread(per_identity),
        }
        print(f"   {lanes} lane(s): {out[str(lanes)]}", flush=True)
    return out


def join_views(
    make_on_sale: Callable[[str, int], Event],
    redis_reading: Callable[[], RedisReading],
    lane_counts: tuple[int, ...] = (8, 32),
    part_sizes: tuple[int, ...] = (1, 12, 25),
    *,
    lane_line: int = 30_000,
    parts: int = 300,
    runs: int = 3,
) -> dict[str, Any]:
    """What a join part of a laned line costs more once in its lane's index: its fans'
    join views (queueing/line/join_views.py): one ``lane_counts`` script on every other lane
    (ZCARDs and a ZCOUNT per fan), one pipelined round trip, then one ``view_write`` script
    in the part's own lane. Parts of ``part_sizes`` fans, all in one lane (a batch's
    newcomers' part), the lane turning with each part, ``parts`` of them per run, on lines
    whose every lane holds ``lane_line`` waiting fans (a sorted set's ZCOUNT grows only with
    the log of its size). The part's fans are not added to their lane's set: no other lane's
    count reads it.

    Per part: this thread's CPU and wall time (a web process's batch thread runs the views
    after the part's commit). Per script: the Redis server's own CPU (``used_cpu_user`` +
    ``used_cpu_sys``: reading the pipeline and answering too) and EVALSHA's ``usec`` (the
    script alone), each script on its own: ``lane_counts`` as join_views sends them (every
    other lane in one pipeline, as on one Redis) and alone in its round trip (as on a
    cluster whose masters each hold one lane), ``view_write`` with the views join_views
    wrote. And the bytes one view key takes (``MEMORY USAGE``)."""
    from queueing.hot import keys
    from queueing.hot import line_index as hot_lines
    from queueing.hot.client import client, run_script_many
    from queueing.hot.epoch import epoch_states
    from queueing.hot.line_index import IndexState
    from queueing.line.join_views import _view_seconds
    from queueing.line.join_views import join_views as views_of
    from queueing.line.reads import event_layout

    redis = client()
    out: dict[str, Any] = {
        "lane_line": lane_line,
        "parts_per_run": parts,
        "view_seconds": _view_seconds(),
        "by_lanes": {},
    }
    for lanes in lane_counts:
        event = make_on_sale(f"views-{lanes}", lanes)
        layout = event_layout(event.pk)
        assert layout.lanes == lanes, layout
        assert epoch_states([event.pk], lanes={event.pk: lanes})[event.pk] is IndexState.READY
        (tier,) = layout.tiers
        # Order keys interleaved over the lanes, as joins drawn over time fill them.
        for lane in range(lanes):
            key = keys.tier_queue(event.pk, tier.id, lane)
            for first in range(0, lane_line, 10_000):
                scores = {
                    lane * 10**8 + i: i * lanes + lane
                    for i in range(first, min(lane_line, first + 10_000))
                }
                redis.zadd(key, scores)
        next_member, next_key = 10**9, lane_line * lanes
        by_size: dict[str, Any] = {}
        for size in part_sizes:
            thread_us, wall_us, server_us, script_usec = [], [], [], []
            counts_us, counts_usec, alone_us, alone_usec = [], [], [], []
            write_us, write_usec = [], []
            view_bytes: list[float] = []
            for _ in range(runs):
                # A new member and a new order key each (behind everyone), out of the timing.
                made = [
                    [
                        (next_member + n * size + i, n % lanes, tier.id, next_key + n * size + i)
                        for i in range(size)
                    ]
                    for n in range(parts)
                ]
                next_member, next_key = next_member + parts * size, next_key + parts * size
                before, started = redis_reading(), time.perf_counter()
                thread_before = time.thread_time()
                written = [views_of(layout, joined) for joined in made]
                thread = time.thread_time() - thread_before
                wall = time.perf_counter() - started
                after = redis_reading()
                assert all(len(w) == size for w in written), written[:1]
                _, cpu = redis_spent(before, after)
                thread_us.append(thread * 1e6 / parts)
                wall_us.append(wall * 1e6 / parts)
                server_us.append(cpu * 1e6 / parts)
                script_usec.append((after.usec["evalsha"] - before.usec["evalsha"]) / parts)
                member, lane = made[0][0][0], made[0][0][1]
                view_bytes.append(
                    redis.memory_usage(keys.join_view(event.pk, member, lane), samples=0)
                )

                # lane_counts alone: as join_views asks (every other lane, one pipeline) ...
                asks = [
                    {
                        other: [(0, order_key) for _, _, _, order_key in joined]
                        for other in range(lanes)
                        if other != joined[0][1]
                    }
                    for joined in made
                ]
                calls = parts * (lanes - 1)
                before = redis_reading()
                for ask in asks:
                    hot_lines.lanes_counts_below(layout, ask)
                after = redis_reading()
                counts_us.append(redis_spent(before, after)[1] * 1e6 / calls)
                counts_usec.append((after.usec["evalsha"] - before.usec["evalsha"]) / calls)
                # ... and one a round trip, as to a master holding that lane alone.
                alone = [
                    [
                        keys.epoch(event.pk, other),
                        keys.prequeue(event.pk, other),
                        keys.tier_queue(event.pk, tier.id, other),
                    ]
                    for other in range(lanes)
                ]
                before = redis_reading()
                for ask in asks:
                    for other, pairs in ask.items():
                        args = [v for position, key in pairs for v in (position + 1, key)]
                        run_script_many("lane_counts", [(alone[other], args)])
                after = redis_reading()
                alone_us.append(redis_spent(before, after)[1] * 1e6 / calls)
                alone_usec.append((after.usec["evalsha"] - before.usec["evalsha"]) / calls)

                # view_write alone, with the views join_views wrote.
                writes = [
                    (
                        joined[0][1],
                        {m: (tier.id, w[m].rsplit("|", 2)[0]) for m, *_ in joined},
                    )
                    for joined, w in zip(made, written, strict=True)
                ]
                before = redis_reading()
                for lane, views in writes:
                    hot_lines.join_views_write(
                        event.pk, lane, views, ttl_seconds=out["view_seconds"]
                    )
                after = redis_reading()
                write_us.append(redis_spent(before, after)[1] * 1e6 / parts)
                write_usec.append((after.usec["evalsha"] - before.usec["evalsha"]) / parts)
            by_size[str(size)] = {
                "thread_cpu_us_per_part": spread(thread_us),
                "wall_us_per_part": spread(wall_us),
                "redis_cpu_us_per_part": spread(server_us),
                "evalsha_usec_per_part": spread(script_usec),
                "lane_counts_redis_cpu_us_per_call": spread(counts_us),
                "lane_counts_evalsha_usec_per_call": spread(counts_usec),
                "lane_counts_alone_redis_cpu_us_per_call": spread(alone_us),
                "lane_counts_alone_evalsha_usec_per_call": spread(alone_usec),
                "view_write_redis_cpu_us_per_call": spread(write_us),
                "view_write_evalsha_usec_per_call": spread(write_usec),
                "view_key_bytes": spread(view_bytes, 0),
            }
            print(f"   {lanes} lanes, parts of {size}: {by_size[str(size)]}", flush=True)
        out["by_lanes"][str(lanes)] = by_size
    return out
