"""The auditors' home (dashboard/audit_home.py): where an auditor lands after signing in, the
on-sales paged with each chain's kept verdict, and "verify now" going on from it
(dashboard/audit_verdicts.py)."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import Client
from django.utils.timezone import now

from dashboard import audit_home, audit_verdicts
from dashboard.models import AuditVerdict
from queueing.models import AuditAction, AuditRecord
from queueing.records.audit import audit_append, audit_lane_heads_ensure
from queueing.records.audit_roots import audit_root_write
from tests.helpers import AUDITOR, fans_join, staff_client, staff_user

pytestmark = pytest.mark.django_db

HOME = "/dashboard/audit/"
RIGHT = "a-long-right-password"


def verify_now(client: Client, slug: str, **form: str) -> str:
    """POST "verify now"; the message the list shows after it."""
    response = client.post(f"{HOME}{slug}/verify", form)
    assert response.status_code == 302 and response["Location"].startswith(HOME)
    page = client.get(response["Location"])
    return re.search(r'<p class="message[^"]*" role="status">(.*?)</p>', page.content.decode())[1]


def row_of(client: Client, slug: str, **params: str) -> str:
    page = client.get(HOME, params).content.decode()
    return re.search(rf'<tr data-event="{slug}">(.*?)</tr>', page, re.S)[1]


@pytest.fixture
def auditor() -> Client:
    return staff_client("audrey", **AUDITOR)


def test_an_auditor_lands_on_their_page_and_staff_on_theirs(make_event) -> None:
    make_event(slug="tour")
    staff_user("audrey", password=RIGHT, **AUDITOR)
    staff_user("ann", "view_event", password=RIGHT)
    auditor, staff = Client(), Client()
    signed = auditor.post("/dashboard/sign-in/", {"username": "audrey", "password": RIGHT})
    assert (signed.status_code, signed["Location"]) == (302, HOME)
    assert b'data-event="tour"' in auditor.get(HOME).content
    # The dashboard's own address sends them here too, not to the admin's login.
    assert auditor.get("/dashboard/")["Location"] == HOME
    signed = staff.post("/dashboard/sign-in/", {"username": "ann", "password": RIGHT})
    assert (signed.status_code, signed["Location"]) == (302, "/dashboard/")
    assert staff.get("/dashboard/").status_code == 200  # the catalogue, as before
    assert staff.get(HOME).status_code == 200  # staff may audit as well


def test_others_are_kept_out(make_event) -> None:
    make_event(slug="tour")
    sent = Client().get(HOME)
    assert sent.status_code == 302 and sent["Location"].startswith("/dashboard/sign-in/?next=")
    fan = staff_client("fan", staff=False)
    assert fan.get(HOME).status_code == 403
    assert fan.post(f"{HOME}tour/verify").status_code == 403
    assert not AuditVerdict.objects.exists()


def test_the_list_is_paged_and_links_each_on_sales_trail(make_event, auditor, monkeypatch) -> None:
    monkeypatch.setattr(audit_home, "PER_PAGE", 2)
    for slug in ("one", "two", "three"):
        make_event(slug=slug)
    first = auditor.get(HOME).content.decode()
    assert re.findall(r'<tr data-event="([a-z]+)">', first) == ["three", "two"]
    assert "1–2 of 3" in first and 'rel="next"' in first
    second = auditor.get(HOME, {"page": 2}).content.decode()
    assert re.findall(r'<tr data-event="([a-z]+)">', second) == ["one"]
    assert auditor.get(HOME, {"page": "x"}).status_code == 200  # a bad page: the first
    assert re.findall(
        r'<tr data-event="([a-z]+)">', auditor.get(HOME, {"q": "tw"}).content.decode()
    ) == ["two"]
    row = row_of(auditor, "one", page="2")
    links = dict(re.findall(r'href="([^"]+)" data-link="([a-z-]+)"', row))
    assert {v: k for k, v in links.items()} == {
        "report": "/dashboard/events/one/report",
        "report-csv": "/dashboard/events/one/report.csv",
        "report-api": "/api/v1/audit/events/one/report",
        "records": "/api/v1/audit/records/?event=one",
        "records-csv": "/api/v1/audit/records/?event=one&amp;format=csv",
    }
    for href in links:
        assert auditor.get(href.replace("&amp;", "&")).status_code == 200, href
    assert "Not checked yet" in row


def test_viewing_the_list_reads_no_chain(make_event, auditor, monkeypatch) -> None:
    event = make_event(slug="tour")
    fans_join(event.slug, 3)
    verify_now(auditor, "tour")

    def no_reading(**kwargs: object) -> None:
        raise AssertionError("the page read a chain")

    monkeypatch.setattr(audit_verdicts, "audit_event_verify", no_reading)
    assert "Intact" in row_of(auditor, "tour")
    # And its queries do not grow with the on-sales listed.
    with connection.execute_wrapper(counter := QueryCounter()):
        auditor.get(HOME)
    for slug in ("a", "b", "c", "d"):
        make_event(slug=slug)
    with connection.execute_wrapper(more := QueryCounter()):
        auditor.get(HOME)
    assert more.count == counter.count


class QueryCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        self.count += 1
        return execute(sql, params, many, context)


def test_verify_now_goes_on_from_the_last_verdict(make_event, auditor, monkeypatch) -> None:
    event = make_event(slug="tour")
    fans_join(event.slug, 3)  # created, started, three joins: 5 records
    said = verify_now(auditor, "tour")
    assert said == "On-sale tour: intact, all 5 records."
    kept = AuditVerdict.objects.get(event=event)
    assert (kept.ok, kept.checked_seq, kept.head_seq) == (True, 5, 5)
    row = row_of(auditor, "tour")
    assert "Intact</span> up to seq 5" in row and "checked <time" in row

    fans_join(event.slug, 2)
    assert "2 newer not checked yet" in row_of(auditor, "tour")
    asked = []
    real = audit_verdicts.audit_event_verify
    monkeypatch.setattr(
        audit_verdicts, "audit_event_verify", lambda **kw: asked.append(kw) or real(**kw)
    )
    assert verify_now(auditor, "tour") == "On-sale tour: intact, all 7 records."
    assert asked[-1]["after"][None].seq == 5  # the two new records only
    assert verify_now(auditor, "tour", **{"from": "start"}).endswith("all 7 records.")
    assert asked[-1]["after"] == {}


def test_a_long_trail_is_checked_a_stretch_per_request(make_event, auditor, settings) -> None:
    settings.WR_AUDIT_VERIFY_MAX = 3
    event = make_event(slug="tour")
    fans_join(event.slug, 5)  # 7 records
    assert verify_now(auditor, "tour") == (
        "On-sale tour: intact up to seq 3; 4 more to check: verify again to go on."
    )
    assert "4 newer not checked yet" in row_of(auditor, "tour")
    assert verify_now(auditor, "tour").startswith("On-sale tour: intact up to seq 6;")
    assert verify_now(auditor, "tour") == "On-sale tour: intact, all 7 records."


def test_tampering_shows_as_broken_where_it_is(make_event, auditor) -> None:
    event = make_event(slug="tour")
    fans_join(event.slug, 3)
    verify_now(auditor, "tour")
    target = AuditRecord.objects.get(event=event, seq=4)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE queueing_auditrecord SET actor = 'someone-else' WHERE id = %s", [target.id]
        )
    # Going on from seq 5 reads nothing older: the change is found from the start.
    assert verify_now(auditor, "tour") == "On-sale tour: intact, all 5 records."
    said = verify_now(auditor, "tour", **{"from": "start"})
    assert said == "On-sale tour: broken at seq 4: its hash does not match its contents."
    row = row_of(auditor, "tour")
    assert f"Broken</span> at seq 4 (record id {target.id})" in row
    # A broken verdict is never gone on from: the next check reads the chain again.
    assert verify_now(auditor, "tour").startswith("On-sale tour: broken at seq 4")


def test_the_record_a_check_stopped_at_is_itself_checked_again(make_event, auditor) -> None:
    event = make_event(slug="tour")
    fans_join(event.slug, 3)
    verify_now(auditor, "tour")
    last = AuditRecord.objects.get(event=event, seq=5)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE queueing_auditrecord SET hash = %s WHERE id = %s", ["f" * 64, last.id]
        )
    assert verify_now(auditor, "tour") == (
        "On-sale tour: broken at seq 5: seq 5 changed since it was last checked."
    )


def test_bad_requests_are_not_500s(make_event, auditor) -> None:
    make_event(slug="tour")
    assert auditor.get(f"{HOME}tour/verify").status_code == 405
    assert auditor.post(f"{HOME}nope/verify").status_code == 404
    assert auditor.get(HOME, {"q": "x" * 5000, "page": "-1"}).status_code == 200


def test_the_command_checks_the_whole_chain_and_keeps_its_verdict(make_event, settings) -> None:
    settings.WR_AUDIT_VERIFY_MAX = 2
    event = make_event(slug="tour")
    fans_join(event.slug, 3)
    call_command("verify_audit", "tour")
    kept = AuditVerdict.objects.get(event=event)
    assert (kept.ok, kept.checked_seq, kept.head_seq) == (True, 5, 5)


def test_an_on_sale_with_lanes_is_checked_chain_by_chain(make_event, auditor, settings) -> None:
    settings.WR_AUDIT_VERIFY_MAX = 4
    event = make_event(slug="tour")  # created, started: 2 records in its root chain
    audit_lane_heads_ensure(event_id=event.id, lanes=2)
    for lane in (0, 1, 1):
        with transaction.atomic():
            audit_append(
                event_id=event.id, action=AuditAction.JOINED, actor="fan", at=now(), lane=lane
            )
    assert audit_root_write(event_id=event.id, now=now()) is not None  # the root's third
    assert verify_now(auditor, "tour") == (
        "On-sale tour: intact in 4 records; 2 more to check: verify again to go on."
    )
    kept = AuditVerdict.objects.get(event=event)
    assert (kept.checked_seq, kept.lanes["0"]["checked_seq"], kept.lanes["1"]["checked_seq"]) == (
        3,
        1,
        0,
    )
    assert "2 newer not checked yet" in row_of(auditor, "tour")
    assert verify_now(auditor, "tour") == "On-sale tour: intact, all 6 records."
    assert "Intact</span> in 6 records (2 lanes)" in row_of(auditor, "tour")

    target = AuditRecord.objects.get(event=event, lane=1, seq=2)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE queueing_auditrecord SET actor = 'x' WHERE id = %s", [target.id])
    settings.WR_AUDIT_VERIFY_MAX = 100
    said = verify_now(auditor, "tour", **{"from": "start"})
    assert said == "On-sale tour: broken in lane 1 at seq 2: its hash does not match its contents."
    assert f"Broken</span> in lane 1 at seq 2 (record id {target.id})" in row_of(auditor, "tour")
    with pytest.raises(CommandError, match="lane 1: its hash does not match"):
        call_command("verify_audit", "tour")
