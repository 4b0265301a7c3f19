"""The backup and restore drill of docs/operations.md, with the real processes: a dump taken
while fans join a live on-sale, restored into a new database by scripts/restore_drill.sh, and
the room started on it with an empty hot index."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import jwt
import psycopg
import pytest
from django.db import connection

from queueing.hot import epoch
from queueing.hot.line_index import IndexState
from queueing.models import QueueEntry
from queueing.rules.layout import poll_after_seconds
from queueing.rules.ticket_codec import ticket_read
from tests.http import Reply, fan_joins, request
from tests.processes import BIN, ROOT, process_env, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

HEARTBEAT = 300  # nobody goes away while the drill runs


@dataclass(frozen=True)
class Join:
    ticket: str
    answered_at: float  # time.monotonic() when the 201 came back


class Joining:
    """Fans joining over HTTP, two at a time, until stopped; every acknowledged join kept."""

    def __init__(self, base: str, slug: str) -> None:
        self.base, self.slug = base, slug
        self.joins: list[Join] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._join, daemon=True) for _ in range(2)]

    def _join(self) -> None:
        while not self._stop.is_set():
            ticket = fan_joins(self.base, self.slug)["ticket"]
            self.joins.append(Join(ticket, time.monotonic()))

    def __enter__(self) -> Joining:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def answered(self, *, before: float = float("inf"), after: float = 0.0) -> list[str]:
        return [j.ticket for j in list(self.joins) if after < j.answered_at < before]


def _url(name: str) -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{name}"


def _status(base: str, ticket: str) -> Reply:
    return request("GET", f"{base}/api/v1/tickets/{ticket}")


def _passes_handed_over(base: str, tickets: list[str], want: int) -> dict[str, str] | None:
    bodies = {t: _status(base, t).body for t in tickets}
    passes = {t: b["pass"] for t, b in bodies.items() if b["status"] == "admitted"}
    return passes if len(passes) >= want else None


def _from_the_hot_index(reply: Reply) -> bool:
    """Answered from Redis: a degraded answer (from PostgreSQL) asks to be polled three times
    later (docs/api.md, X-Poll-After-Seconds)."""
    body = reply.body
    expected = poll_after_seconds(
        heartbeat_seconds=HEARTBEAT, position=body["position"], degraded=False
    )
    return float(reply.headers["x-poll-after-seconds"]) == expected and not body["approximate"]


def test_a_dump_taken_during_joins_restores_every_acknowledged_join(
    make_event, settings, tmp_path: Path
) -> None:
    event = make_event(capacity=100, rate_per_minute=120, heartbeat_seconds=HEARTBEAT)
    dump = tmp_path / "room.dump"
    restored = f"{connection.settings_dict['NAME']}_restored"
    with running_stack() as stack:
        base = stack.web_at_public_url()
        stack.worker()
        stack.beat()
        first = [fan_joins(base, event.slug)["ticket"] for _ in range(6)]
        # Fans let in at the pace, their passes signed and handed over before the dump.
        passes = wait_until(
            lambda: _passes_handed_over(base, first, 3), timeout=30, what="three passes"
        )
        with Joining(base, event.slug) as joining:
            wait_until(lambda: len(joining.joins) >= 20, timeout=20, what="joins under way")
            dump_began = time.monotonic()
            subprocess.run(
                ["pg_dump", "-Fc", "-f", str(dump), _url(connection.settings_dict["NAME"])],
                check=True,
                timeout=60,
            )
            dump_ended = time.monotonic()
            during = len(joining.answered(after=dump_began, before=dump_ended))
            wait_until(
                lambda: len(joining.answered(after=dump_ended)) >= 5,
                timeout=20,
                what="joins after the dump",
            )
    acknowledged = first + joining.answered(before=dump_began)
    lost = joining.answered(after=dump_ended)
    assert len(acknowledged) >= 26 and during >= 1, (len(acknowledged), during)
    entry_ids = {t: ticket_read(t).entry_id for t in acknowledged}
    order_keys = dict(
        QueueEntry.objects.filter(id__in=entry_ids.values()).values_list("id", "order_key")
    )

    try:
        drill = subprocess.run(
            [str(ROOT / "scripts" / "restore_drill.sh"), str(dump), _url(restored), "--keep"],
            env=process_env(PYTHON=str(BIN / "python")),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert drill.returncode == 0, drill.stdout + drill.stderr
        assert f"on-sale {event.slug}: entries" in drill.stdout
        assert "trail intact" in drill.stdout and "signs and verifies" in drill.stdout
        _serve_the_restore(
            restored, event, base, acknowledged, entry_ids, order_keys, passes, lost, settings
        )
        recheck = subprocess.run(
            [str(BIN / "python"), "manage.py", "restore_check", "--skip-checks"],
            cwd=ROOT,
            env=process_env(DATABASE_URL=_url(restored)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        # The trail goes on from the restored head: the records the restored room appended
        # chain onto it.
        assert recheck.returncode == 0 and "trail intact" in recheck.stdout, recheck.stdout
    finally:
        with psycopg.connect(_url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')


def _serve_the_restore(
    restored, event, public_url, acknowledged, entry_ids, order_keys, passes, lost, settings
) -> None:
    with psycopg.connect(_url(restored)) as db:
        rows = db.execute(
            "SELECT id, order_key, status, passed_over_at IS NULL AND status = 'waiting'"
            " FROM queueing_queueentry WHERE event_id = %s",
            [event.id],
        ).fetchall()
    restored_rows = {row[0]: row for row in rows}
    # Every acknowledged join is there, in the same place in the line's order.
    for ticket in acknowledged:
        entry_id = entry_ids[ticket]
        assert entry_id in restored_rows, ticket
        assert restored_rows[entry_id][1] == order_keys[entry_id]
    in_line = sorted(row[1] for row in rows if row[3])

    # The room on the restored database, with a Redis prefix of its own: an empty hot index
    # (under the test's prefix, so that the test's clean-up takes its keys too).
    fresh = f"{settings.WR_REDIS_PREFIX}:restored"
    with running_stack(
        DATABASE_URL=_url(restored),
        WR_REDIS_PREFIX=fresh,
        CELERY_TASK_DEFAULT_QUEUE=f"{fresh}:celery",
        CHANNELS_PREFIX=f"{fresh}:channels",
        # The room's address does not change with its database: passes name it as issuer.
        WR_PUBLIC_URL=public_url,
    ) as room:
        base = room.web()
        room.worker()  # no beat yet: nobody is let in while places are compared
        waiting = [t for t in acknowledged if restored_rows[entry_ids[t]][3]]
        assert waiting
        # The first polls find no index, are answered from PostgreSQL and ask for a rebuild.
        wait_until(
            lambda: _from_the_hot_index(_status(base, waiting[-1])),
            timeout=30,
            what="the hot index rebuilt",
        )
        settings.WR_REDIS_PREFIX = fresh
        assert epoch.epoch_states([event.id])[event.id] is IndexState.READY
        for ticket in acknowledged:
            reply = _status(base, ticket)
            assert reply.status == 200, (ticket, reply.body)
            assert reply.body["status"] == restored_rows[entry_ids[ticket]][2]
            if ticket in waiting:
                assert _from_the_hot_index(reply), reply
                place = in_line.index(order_keys[entry_ids[ticket]]) + 1
                assert reply.body["position"] == place

        # Passes signed before the dump verify after it, offline and online.
        jwks = request("GET", f"{base}/.well-known/jwks.json").body
        keys = {key["kid"]: jwt.PyJWK(key) for key in jwks["keys"]}
        for ticket, token in passes.items():
            assert _status(base, ticket).body["pass"] == token
            kid = jwt.get_unverified_header(token)["kid"]
            claims = jwt.decode(
                token, keys[kid], algorithms=["EdDSA"], audience=event.slug, issuer=public_url
            )
            online = request("POST", f"{base}/api/v1/passes/verify", {"pass": token}).body
            assert online["valid"] is True and online["ticket_id"] == claims["sub"]

        # Joins acknowledged after the dump are lost; their tickets name nobody, not even
        # once the restored room has given out as many new places.
        fresh_tickets = [fan_joins(base, event.slug)["ticket"] for _ in range(len(lost) + 3)]
        assert not set(fresh_tickets) & set(lost)
        for ticket in lost:
            reply = _status(base, ticket)
            assert (reply.status, reply.body["error"]) == (404, "ticket_not_found")

        # The room goes on: the next fan in line is let in at the pace.
        room.beat()
        front = min(waiting, key=lambda t: order_keys[entry_ids[t]])
        wait_until(
            lambda: _status(base, front).body["status"] == "admitted",
            timeout=30,
            what="admission to go on after the restore",
        )
