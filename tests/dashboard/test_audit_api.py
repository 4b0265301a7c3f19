import base64
import csv
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from queueing.beat import event_tick
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many, audit_lane_heads_ensure
from queueing.records.audit_roots import audit_root_write
from queueing.rules.states import EntryStatus
from tests.helpers import AUDITOR, entry_of, fans_join, poll, shop_completes, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def auditor():
    return staff_client("audrey", api=True, **AUDITOR)


def test_a_full_lifecycle_appears_in_the_trail_in_order(make_event, auditor) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    first, second = fans_join(event.slug, 2)
    event_tick(event_id=event.id, now=timezone.now())
    token = poll(first)["pass"]
    shop_completes(token, event.integration_key)
    APIClient().delete(f"/api/v1/tickets/{second}")
    body = auditor.get(f"/api/v1/audit/records/?event={event.slug}").json()
    assert [r["action"] for r in body["results"]] == [
        "event_created",
        "shuffled",  # nothing scheduled: the line starts with the on-sale
        "joined",
        "joined",
        "admitted",
        "completed",
        "left",
    ]
    assert body["results"][2]["ticket_id"] == str(entry_of(first).public_id)
    assert set(body["results"][0]) == {
        "id",
        "at",
        "event",
        "ticket_id",
        "action",
        "actor",
        "data",
        "hash",
        "prev_hash",
        "event_id",
        "seq",
        "at_hashed",
        "lane",
    }
    assert {r["lane"] for r in body["results"]} == {None}  # one chain: no lanes
    assert [r["seq"] for r in body["results"]] == list(range(1, 8))
    assert {r["event_id"] for r in body["results"]} == {event.id}
    # Support looks a fan up by the ticket they hold.
    mine = auditor.get("/api/v1/audit/records/", {"ticket": first}).json()["results"]
    assert [r["action"] for r in mine] == ["joined", "admitted", "completed"]


def test_editing_one_row_makes_verify_report_exactly_that_row(make_event, auditor) -> None:
    event = make_event()
    fans_join(event.slug, 3)
    assert auditor.get(f"/api/v1/audit/events/{event.slug}/verify").json() == {
        "ok": True,
        "records": 5,
        "first_bad_id": None,
    }
    target = AuditRecord.objects.filter(event=event).order_by("seq")[3]
    with connection.cursor() as cursor:
        cursor.execute(
            'UPDATE queueing_auditrecord SET data = \'{"tier": "VIP"}\' WHERE id = %s',
            [target.id],
        )
    verdict = auditor.get(f"/api/v1/audit/events/{event.slug}/verify").json()
    assert verdict == {"ok": False, "records": 5, "first_bad_id": target.id}
    with pytest.raises(CommandError, match=f"first bad record id {target.id}"):
        call_command("verify_audit", event.slug)


def test_an_auditor_can_read_but_not_change_anything(make_event, auditor) -> None:
    event = make_event()
    assert auditor.get("/api/v1/audit/records/").status_code == 200
    assert auditor.get(f"/api/v1/audit/events/{event.slug}/report").status_code == 200
    assert auditor.get("/api/v1/manage/events/").status_code == 403
    assert (
        auditor.patch(
            f"/api/v1/manage/events/{event.slug}/", {"capacity": 1}, format="json"
        ).status_code
        == 403
    )
    assert auditor.post(f"/api/v1/manage/events/{event.slug}/pause").status_code == 403


@pytest.mark.parametrize("who", ["auditor", "staff"])
def test_a_write_on_the_audit_api_is_405_with_allow_for_those_who_may_read(make_event, who) -> None:
    event = make_event()
    reader = staff_client(who, api=True, **(AUDITOR if who == "auditor" else {}))
    paths = [
        "/api/v1/audit/records/",
        f"/api/v1/audit/events/{event.slug}/verify",
        f"/api/v1/audit/events/{event.slug}/report",
    ]
    for path in paths:
        for method in ("post", "put", "patch", "delete"):
            response = getattr(reader, method)(path, {}, format="json")
            assert response.status_code == 405, (path, method, response.content)
            assert response.json()["error"] == "method_not_allowed"
            assert response["Allow"] == "GET, HEAD, OPTIONS"
    # The on-sale's creation and its line's start, nothing more.
    assert list(AuditRecord.objects.order_by("seq").values_list("action", flat=True)) == [
        "event_created",
        "shuffled",
    ]


def test_everyone_else_is_kept_out(make_event) -> None:
    event = make_event()
    assert APIClient().get("/api/v1/audit/records/").status_code == 401
    fan = staff_client("fan", staff=False, api=True)
    response = fan.get(f"/api/v1/audit/events/{event.slug}/verify")
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    # A write is refused as what they may not do, before the method is looked at.
    assert APIClient().delete("/api/v1/audit/records/").status_code == 401
    response = fan.delete("/api/v1/audit/records/")
    assert (response.status_code, response.json()["error"]) == (403, "forbidden")


def test_records_are_cursor_paginated(make_event, auditor) -> None:
    event = make_event()
    fans_join(event.slug, 4)
    page = auditor.get("/api/v1/audit/records/", {"event": event.slug, "page_size": 2}).json()
    seen = [r["id"] for r in page["results"]]
    while page["next"]:
        page = auditor.get(page["next"]).json()
        seen += [r["id"] for r in page["results"]]
    assert seen == sorted(seen) and len(seen) == 6


def _cursor(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "1001"}, "page_size"),
        ({"page_size": "many"}, "page_size"),
        ({"cursor": _cursor("o=x")}, "cursor"),
        ({"cursor": _cursor("p=abc")}, "cursor"),
        ({"cursor": _cursor("p=" + "9" * 40)}, "cursor"),
    ],
)
def test_paging_input_the_records_did_not_give_is_a_400(event, auditor, params, field) -> None:
    """As the staff API's on-sale list (staff/event_list.py): never a 404 or a 500."""
    response = auditor.get("/api/v1/audit/records/", params)
    assert response.status_code == 400, response.content
    assert (response.json()["error"], set(response.json()["fields"])) == (
        "validation_error",
        {field},
    )


@pytest.mark.parametrize("how", ["query", "accept"])
def test_records_stream_as_csv(make_event, auditor, how) -> None:
    event = make_event()
    fans_join(event.slug, 3)
    if how == "query":
        response = auditor.get("/api/v1/audit/records/", {"event": event.slug, "format": "csv"})
    else:
        response = auditor.get(
            "/api/v1/audit/records/", {"event": event.slug}, HTTP_ACCEPT="text/csv"
        )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    actions = [r["action"] for r in rows]
    assert actions == ["event_created", "shuffled", "joined", "joined", "joined"]
    assert rows[2]["event"] == event.slug


@pytest.mark.parametrize(
    "params",
    [
        {"since": "yesterday"},
        {"until": "2026-13-45"},
        {"action": "teleported"},
        {"event": "nope"},
        {"ticket": "garbage"},
        {"ticket": "00000000-0000-0000-0000-000000000000x"},
    ],
)
def test_bad_filters_are_validation_errors(auditor, params) -> None:
    response = auditor.get("/api/v1/audit/records/", params)
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_time_filters(make_event, auditor) -> None:
    event = make_event()
    fans_join(event.slug, 2)
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    assert auditor.get("/api/v1/audit/records/", {"since": future}).json()["results"] == []
    assert len(auditor.get("/api/v1/audit/records/", {"until": future}).json()["results"]) == 4


def test_the_report_is_right_on_a_constructed_history(make_event, auditor) -> None:
    """Five fans in one tier; the trail admits them in the order 1, 3, 2, 5, 4 (two
    inversions), with known waits against known quotes; one more fan leaves, one expires."""
    event = make_event(heartbeat_seconds=3600)
    tickets = fans_join(event.slug, 7)
    entries = [entry_of(t) for t in tickets]
    joined = timezone.now() - timedelta(minutes=30)
    waits = [60, 120, 180, 240, 300]
    quotes = [(30, 60, 90), (100, 150, 200), (10, 20, 30), (200, 250, 300), (400, 500, 600)]
    admitted_order = [0, 2, 1, 4, 3]
    with transaction.atomic():
        for entry, wait, (p10, p50, p90) in zip(entries, waits, quotes, strict=False):
            QueueEntry.objects.filter(pk=entry.pk).update(
                status=EntryStatus.ADMITTED,
                joined_at=joined,
                admitted_at=joined + timedelta(seconds=wait),
                quoted_p10=p10,
                quoted_p50=p50,
                quoted_p90=p90,
            )
        QueueEntry.objects.filter(pk=entries[5].pk).update(
            status=EntryStatus.LEFT, ended_at=timezone.now()
        )
        QueueEntry.objects.filter(pk=entries[6].pk).update(
            status=EntryStatus.EXPIRED, ended_at=timezone.now()
        )
        audit_append_many(
            event_id=event.id,
            actor="test",
            at=timezone.now(),
            items=[AuditItem(AuditAction.ADMITTED, entries[i].public_id) for i in admitted_order],
        )
    report = auditor.get(f"/api/v1/audit/events/{event.slug}/report").json()
    assert report["admitted"] == 5
    assert report["order_inversions"] == 2
    assert report["kendall_tau"] == pytest.approx(1 - 2 * 2 / 10)
    # Waits 60..300 s against the quotes: inside for fans 1, 2, 4; outside for 3 and 5.
    assert report["eta_p10_p90_coverage"] == pytest.approx(3 / 5)
    # |wait - p50| = 0, 30, 160, 10, 200 -> median 30.
    assert report["eta_median_abs_error_s"] == pytest.approx(30)
    assert report["abandonment_rate"] == pytest.approx(2 / 7)
    assert report["wait_s"] == {"p50": 180, "p90": 300, "p99": 300}


@pytest.mark.parametrize("event_param", ["%00", "\x00", "a" * 100, "bad slug"])
def test_an_odd_event_filter_is_a_validation_error(auditor, event_param) -> None:
    response = auditor.get("/api/v1/audit/records/", {"event": event_param})
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


@pytest.mark.parametrize(
    "since",
    ["0919-09-04T04:27:07-16:57", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"],
)
def test_times_postgresql_cannot_hold_are_validation_errors_not_500s(auditor, since) -> None:
    response = auditor.get("/api/v1/audit/records/", {"since": since})
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert response.json()["error"] == "validation_error"


def test_an_on_sale_with_lanes_gets_one_verdict_with_each_lanes_part(make_event, auditor):
    event = make_event()
    audit_lane_heads_ensure(event_id=event.id, lanes=2)
    with transaction.atomic():
        audit_append_many(
            event_id=event.id,
            actor="fan",
            at=timezone.now(),
            lane=1,
            items=[AuditItem(action=AuditAction.JOINED, data={"n": n}) for n in range(2)],
        )
    audit_root_write(event_id=event.id, now=timezone.now())
    url = f"/api/v1/audit/events/{event.slug}/verify"
    assert auditor.get(url).json() == {
        "ok": True,
        "records": 5,  # created, started, the root; two in lane 1
        "first_bad_id": None,
        "problem": "",
        "roots": 1,
        "lanes": [
            {"lane": 0, "ok": True, "records": 0, "head_seq": 0, "first_bad_id": None},
            {"lane": 1, "ok": True, "records": 2, "head_seq": 2, "first_bad_id": None},
        ],
    }
    rows = auditor.get("/api/v1/audit/records/", {"event": event.slug}).json()["results"]
    assert [row["lane"] for row in rows] == [None, None, 1, 1, None]
    exported = list(csv.DictReader(io.StringIO(_csv(auditor, event.slug))))
    assert [row["lane"] for row in exported] == ["", "", "1", "1", ""]

    target = AuditRecord.objects.get(event=event, lane=1, seq=1)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE queueing_auditrecord SET actor = 'x' WHERE id = %s", [target.id])
    answer = auditor.get(url).json()
    assert (answer["ok"], answer["first_bad_id"]) == (False, target.id)
    assert answer["problem"] == "lane 1: its hash does not match its contents"
    assert answer["lanes"][1]["ok"] is False


def _csv(auditor, slug: str) -> str:
    response = auditor.get("/api/v1/audit/records/", {"event": slug, "format": "csv"})
    return b"".join(response.streaming_content).decode()


def test_the_report_reads_an_on_sale_with_lanes_whole(make_event, auditor) -> None:
    """Fans' records in three lanes (their seqs overlapping the root chain's), admissions in
    the root chain in the order 2, 1, 3, 4, 5 (one inversion), and a fan who came back after
    being passed over, whose ``back`` is in their lane: counted apart, not as an inversion."""
    event = make_event(heartbeat_seconds=3600)
    audit_lane_heads_ensure(event_id=event.id, lanes=3)
    entries = [entry_of(t) for t in fans_join(event.slug, 6)]
    now = timezone.now()
    with transaction.atomic():
        for n, entry in enumerate(entries):
            audit_append_many(
                event_id=event.id,
                actor="fan",
                at=now,
                lane=n % 3,
                items=[AuditItem(AuditAction.JOINED, entry.public_id, {"order_key": n})] * 3,
            )
        audit_append_many(
            event_id=event.id,
            actor="fan",
            at=now,
            lane=5 % 3,
            items=[AuditItem(AuditAction.BACK, entries[5].public_id)],
        )
        QueueEntry.objects.filter(pk__in=[e.pk for e in entries]).update(
            status=EntryStatus.ADMITTED, admitted_at=now
        )
        audit_append_many(
            event_id=event.id,
            actor="system:admission",
            at=now,
            items=[
                AuditItem(AuditAction.ADMITTED, entries[i].public_id) for i in (1, 0, 5, 2, 3, 4)
            ],
        )
    report = auditor.get(f"/api/v1/audit/events/{event.slug}/report").json()
    assert (report["admitted"], report["order_inversions"]) == (6, 1)
    assert report["came_back_after_turn"] == 1
