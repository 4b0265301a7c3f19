"""The inputs of the capacity plan (bench/capacity_plan.py): what one operation costs, read
from bench/unit_costs.json, and a scenario (bench/scenarios/*.json): the fans, their arrivals,
the pace, the share on WebSockets, the machines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class UnitCosts:
    """What one operation costs, from bench/unit_costs.json (CPU in ms or µs of one core)."""

    web_ms_per_join: float  # lean join path, join limits on, all web processes
    postgresql_ms_per_join: float  # the web processes' backends
    slot_us_per_join: float  # Redis CPU on the on-sale's own keys (index add, the answer)
    redis_us_per_join: float  # all of it, the join limits' keys (other slots) included
    web_us_per_poll: float
    slot_us_per_poll: float  # locate.lua: all on the on-sale's keys; on a line of `poll_line`
    poll_line: int
    web_us_per_socket_second: float  # a waiting page's socket (without `bands`)
    slot_us_per_socket_second: float  # its keep-alive (a ZADD per process); on `socket_line`
    socket_line: int
    keepalive_refresh_s: float
    # (line, locate.lua's server µs per call, the keep-alive's µs per ticket) on synthetic
    # lines: both grow with the line, which the two figures above were not measured at.
    by_line: tuple[tuple[int, float, float], ...]
    kib_per_socket: float
    web_process_mib: float  # an idle web process
    lock_held_ms: tuple[tuple[int, float], ...]  # (batch size, the chain head's hold), measured
    lock_ms_per_admitted: float  # an admission appends its records under the same lock
    admission_ms_per_500: float  # wall time of an admission of 500 (must fit in a tick)
    handover_ms: float  # Django hands an admitted fan its pass
    worker_ms_per_tick: float  # one on-sale's tick, at `tick_admitted` fans admitted
    tick_admitted: float
    slot_us_per_tick: float
    dispatch_ms_per_on_sale: float
    entry_bytes: float  # a queue entry row, indexes included
    audit_bytes: float  # an audit record row, indexes included
    redis_bytes_per_fan: float  # a waiting fan in the hot index
    # One lane's part of a web process's batch, by its size: (fans, ms) for the part's wall
    # time, its PostgreSQL backend's CPU and the batch thread's own CPU. Empty: every part
    # is taken to be full, and a join to cost the HTTP runs' figures above.
    part_wall_ms: tuple[tuple[int, float], ...] = ()
    part_postgresql_ms: tuple[tuple[int, float], ...] = ()
    part_thread_ms: tuple[tuple[int, float], ...] = ()
    http_join_batch: float = 1.0  # the mean batch of the HTTP run whose web CPU was taken
    # (lanes, µs): the web CPU of a new identity drawn in the batch's newcomers' lane
    # (queueing/web/callers.py), measured by lanes. Empty: drawing costs nothing more.
    identity_draw_us: tuple[tuple[int, float], ...] = ()
    bands: SocketBands | None = None  # None: every socket at web_us_per_socket_second
    # A laned line's join views, measured by lanes and part size. None: they cost nothing.
    join_views: JoinViewCosts | None = None

    @classmethod
    def from_measurements(cls, data: dict[str, Any], pick: str = "median") -> UnitCosts:
        """``pick`` which run of each cost: "median", or "max" (the worst run) or "min". The
        chain head's holds are always the median: a run in which the shared machine stalled
        the lock's holder (one measured 272 ms for a batch of 200 against 33-37 ms) says what
        a stall costs, not how many joins the lock lets through.

        The holds, an admission's and the parts' costs come from ``in_process`` where the file
        has one (measured after the chain heads' lock diet, when the rest was not run again);
        the sockets from ``far_back`` where it has one (bench/far_back.py: pages spread over
        a long line, ticks by distance, the keep-alive at the heartbeat's pace)."""

        def worse_setup(*spreads: dict[str, float]) -> float:
            # Measured with 1 and with 2 web processes: the costlier of the two.
            return max(s[pick] for s in spreads)

        http = data["http"].values()
        # The in-process run after the chain heads' lock diet, where there is one.
        since = data.get("in_process", data)
        batches = since["join_batches"]
        sockets = data["sockets"]
        largest = sockets[str(max(int(n) for n in sockets if n.isdigit()))]
        admission, ticks = since["admission"], data["ticks"]
        web_setup = max(http, key=lambda h: h["joins"]["web_cpu_ms"][pick])
        parts = since.get("join_parts", {})
        far = data.get("far_back")

        def by_part(name: str) -> tuple[tuple[int, float], ...]:
            return tuple(sorted((int(n), p[name]) for n, p in parts.items()))

        draws = since.get("identity_draw", {}).get("by_lanes", {})
        views = since.get("join_views")

        socket_figures = {
            "web_us_per_socket_second": largest["web_cpu_us_per_socket_second"],
            "slot_us_per_socket_second": largest["keepalive_us_per_socket_second"],
            "socket_line": max(int(n) for n in sockets if n.isdigit()),
            "keepalive_refresh_s": data["keepalive_refresh_seconds"],
            "bands": None,
        }
        if far is not None:
            # Ticks by distance and the keep-alive at the heartbeat's pace: measured on pages
            # spread over a line of `fans`.
            after = far["after"]
            socket_figures = {
                "web_us_per_socket_second": after["web_cpu_us_per_socket_second"],
                "slot_us_per_socket_second": after["keepalive_us_per_socket_second"],
                "socket_line": far["fans"],
                "keepalive_refresh_s": far["keepalive_refresh_seconds"],
                "bands": SocketBands.from_measurements(far),
            }
        return cls(
            web_ms_per_join=worse_setup(*(h["joins"]["web_cpu_ms"] for h in http)),
            postgresql_ms_per_join=worse_setup(*(h["joins"]["postgresql_cpu_ms"] for h in http)),
            # Full batches, as at a peak (smaller ones measure the server's own background work
            # more than the joins).
            slot_us_per_join=batches["200"]["redis_cpu_us_per_join"][pick],
            redis_us_per_join=worse_setup(*(h["joins"]["redis_cpu_us"] for h in http)),
            web_us_per_poll=worse_setup(*(h["polls"]["web_cpu_us"] for h in http)),
            slot_us_per_poll=worse_setup(*(h["polls"]["redis_cpu_us"] for h in http)),
            poll_line=data["storage"]["redis_line"],
            by_line=tuple(
                sorted(
                    (
                        int(n),
                        line["locate"]["server_cpu_us_per_call"][pick],
                        line["keepalive_us_per_member"][pick],
                    )
                    for n, line in data["redis_by_line"].items()
                )
            ),
            kib_per_socket=sockets["kib_per_socket"],
            web_process_mib=largest["worker_rss_mib_idle"],
            lock_held_ms=tuple(
                sorted((int(n), b["chain_head_held_ms"]["median"]) for n, b in batches.items())
            ),
            lock_ms_per_admitted=admission["chain_head_held_ms"][pick] / admission["fans"],
            admission_ms_per_500=admission["wall_ms"][pick] * 500 / admission["fans"],
            # The median: the slowest is the first, Django's warm-up.
            handover_ms=data["pass_handover"]["wall_ms_each"]["median"],
            worker_ms_per_tick=ticks["worker_cpu_ms_per_tick"],
            tick_admitted=ticks["rate_per_minute"] / 60,
            slot_us_per_tick=ticks["hot_redis_cpu_us_per_tick"],
            dispatch_ms_per_on_sale=data["dispatch"]["ms_per_on_sale"][pick],
            entry_bytes=data["storage"]["queue_entry_bytes"],
            audit_bytes=data["storage"]["audit_record_bytes"],
            redis_bytes_per_fan=data["storage"]["redis_bytes_per_waiting_fan"],
            part_wall_ms=by_part("wall_ms_per_part"),
            part_postgresql_ms=by_part("postgresql_cpu_ms_per_part"),
            part_thread_ms=tuple((n, ms * n) for n, ms in by_part("thread_cpu_ms_per_join")),
            http_join_batch=web_setup.get("mean_join_batch", 1.0),
            identity_draw_us=tuple(
                sorted((int(n), d["web_cpu_us_per_identity"][pick]) for n, d in draws.items())
            ),
            join_views=JoinViewCosts.from_measurements(views, pick) if views else None,
            **socket_figures,
        )


# (lanes, ((part's fans, figure), ...)), both ascending.
ByLanesAndPart = tuple[tuple[int, tuple[tuple[int, float], ...]], ...]


@dataclass(frozen=True)
class JoinViewCosts:
    """What a join part of a laned line costs more once in its lane's index: its fans counted
    in every other lane and their views kept in their own (queueing/line/join_views.py), as
    bench/unit_inprocess.py ``join_views`` measured it by lanes and by the part's fans."""

    thread_us: ByLanesAndPart  # the batch thread's CPU, per part
    wall_us: ByLanesAndPart  # the batch thread's wall time, per part (on one local Redis)
    # One other lane's ``lane_counts`` script, Redis CPU: alone in its round trip, as to a
    # master that holds that lane alone (a pipeline of several lanes to one server costs less
    # a call: the round trip's reading and answering shared).
    lane_counts_us: ByLanesAndPart
    view_write_us: ByLanesAndPart  # the part's own lane's ``view_write`` script, Redis CPU
    view_bytes: tuple[tuple[int, float], ...]  # (lanes, one view key's bytes in Redis)
    view_seconds: float  # how long a view is kept (the room's default settings)

    @classmethod
    def from_measurements(cls, data: dict[str, Any], pick: str = "median") -> JoinViewCosts:
        by_lanes = sorted((int(n), sizes) for n, sizes in data["by_lanes"].items())

        def table(name: str) -> ByLanesAndPart:
            return tuple(
                (lanes, tuple(sorted((int(n), part[name][pick]) for n, part in sizes.items())))
                for lanes, sizes in by_lanes
            )

        return cls(
            thread_us=table("thread_cpu_us_per_part"),
            wall_us=table("wall_us_per_part"),
            lane_counts_us=table("lane_counts_alone_redis_cpu_us_per_call"),
            view_write_us=table("view_write_redis_cpu_us_per_call"),
            view_bytes=tuple(
                (lanes, max(part["view_key_bytes"]["median"] for part in sizes.values()))
                for lanes, sizes in by_lanes
            ),
            view_seconds=float(data["view_seconds"]),
        )


@dataclass(frozen=True)
class SocketBands:
    """A waiting page's ticks by its distance from the front (queueing/rules/tick_bands.py):
    every tick in the first `front_places`, fewer to the `near_places`, fewest behind. A
    socket costs its web process `fixed_us` a second (pings, the keep-alive, the fan-out's
    book-keeping) and `us_per_tick` for each tick sent: a straight line through the far-back
    run's measured mix and the reference's measured cost per tick sent."""

    front_places: int
    near_places: int
    ticks_per_second: tuple[float, float, float]  # front, near, far (and the pre-queue's)
    fixed_us: float
    us_per_tick: float

    @classmethod
    def from_measurements(cls, far: dict[str, Any]) -> SocketBands:
        ticks = far["after"]["ticks"]
        rates = tuple(ticks[band]["ticks_per_socket_second"] for band in ("front", "near", "far"))
        counts = [ticks[band]["sockets"] for band in ("front", "near", "far")]
        mean_rate = sum(r * n for r, n in zip(rates, counts, strict=True)) / sum(counts)
        per_tick = far["web_cpu_us_per_tick_sent"]
        return cls(
            front_places=far["front_places"],
            near_places=far["front_places"] * far["near_band_fronts"],
            ticks_per_second=(rates[0], rates[1], rates[2]),
            fixed_us=far["after"]["web_cpu_us_per_socket_second"] - mean_rate * per_tick,
            us_per_tick=per_tick,
        )

    def web_us(self, waiting: float, prequeue: float) -> float:
        """Web CPU a second, µs, of one socket per fan: ``waiting`` in line by position,
        ``prequeue`` far back (their places are not drawn yet)."""
        front = min(waiting, self.front_places)
        near = min(waiting - front, self.near_places - self.front_places)
        far = waiting - front - near + prequeue
        counts = (front, near, far)
        return sum(
            n * (self.fixed_us + rate * self.us_per_tick)
            for n, rate in zip(counts, self.ticks_per_second, strict=True)
        )


@dataclass(frozen=True)
class Segment:
    minutes: float
    share: float  # of all fans, arriving evenly over the segment


@dataclass(frozen=True)
class Box:
    cores: int
    memory_gib: float


@dataclass(frozen=True)
class Scenario:
    name: str
    fans: int
    arrivals: tuple[Segment, ...]
    start_minute: float  # the line starts (the pre-queue is shuffled in) at this minute
    admissions_per_minute: int
    sell_out_after: int | None  # admissions; then the on-sale closes
    websocket_share: float  # of the pages in line; the others poll
    heartbeat_seconds: int
    join_batch: int  # WR_JOIN_BATCH_MAX
    admission_batch: int  # WR_ADMISSION_BATCH
    # Fans revoked a second after the close (line/schedule.py): `make bench`'s line-end row.
    revoke_per_second: int
    audit_records_per_fan: float  # joined, and how the wait ended
    audit_records_per_admitted: float  # more for those admitted: the session's end
    web: Box
    postgresql: Box
    worker: Box
    redis: Box  # one Redis Cluster master: it runs commands on one core
    target_utilisation: float
    on_sales: int = 1  # this many such on-sales at once, each with `fans` of its own
    lanes: int = 1  # each lane a Redis slot and a chain head of its own (docs/api.md, "Lanes")
    # The web processes the edge sends the on-sale's joins to: each commits its batches one
    # lane's part after another, so their number sets how many fans a part holds. None: every
    # part full (the lock's own queue fills them).
    join_processes: int | None = None
    # WR_JOIN_LINGER_MS: a process's batch gathers at least this long (unless full) before it
    # commits, so it holds about joins per process x max(linger, its commit's wall time).
    join_linger_ms: float = 0.0
    # Of the joins at the peak, the share from fans who bring an identity that commits (an
    # Idempotency-Key, a login, a browser joining the on-sale again after leaving it; a laned
    # on-sale's browsers have an identity of their own there, so an earlier on-sale's cookie
    # is not one): they land in the lane of its hash, spread over every lane. The others get
    # a new identity drawn in their batch's newcomers' lane (queueing/web/callers.py): one
    # part. 1.0: every fan by hash, as before the draw.
    returning_share: float = 1.0
    # An address cap or a mode other than queue: every part of a laned on-sale's join takes
    # the root chain's head too, after its lane's (`_decided_on_sale_wide` in
    # queueing/line/joining.py), before and after the start.
    joins_decided_on_sale_wide: bool = False
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scenario:
        fields = dict(data)
        fields["arrivals"] = tuple(Segment(**s) for s in data["arrivals"])
        for kind in ("web", "postgresql", "worker", "redis"):
            fields[kind] = Box(**data[kind])
        fields["notes"] = tuple(data.get("notes", ()))
        return cls(**fields)
