"""An ended on-sale archived (queueing/line/archives.py, ``manage.py archive_onsale``): a real
sale, with lanes and without, written to one file that the outsider's checker
(scripts/verify_trail.py, run alone under a bare ``python3 -I``) accepts, and refuses once a
byte of a record is changed or a record is removed; the rows leave the database, and the
on-sale says archived with the file's digest. A live on-sale is refused."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from events.models import Event
from queueing.line.archives import archive_file_problem
from queueing.line.leaving import entry_leave
from queueing.models import (
    AuditChainHead,
    AuditLaneHead,
    AuditRecord,
    Invitation,
    PlaceLink,
    QueueEntry,
)
from queueing.records.archive_rows import chain_heads
from queueing.records.audit import hashed_at
from queueing.rules.states import LIVE
from queueing.rules.ticket_codec import TicketRef
from staff.services import event_close
from tests.helpers import (
    AUDITOR,
    entry_of,
    fans_join,
    invitations_settled,
    place_link_for,
    poll,
    registration_drawn,
    registration_window_open,
    registrations_made,
    shop_completes,
    staff_client,
    tick,
)
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

CHECKER = ROOT / "scripts" / "verify_trail.py"


def outsider_checks(archive: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The checker copied alone into a directory of its own and run by the system's Python,
    isolated: nothing of the room but the archive file."""
    alone = tmp_path / "outsider"
    alone.mkdir(exist_ok=True)
    shutil.copy(CHECKER, alone / "verify_trail.py")
    shutil.copy(archive, alone / archive.name)
    return subprocess.run(
        ["/usr/bin/python3", "-I", "verify_trail.py", archive.name],
        cwd=alone,
        capture_output=True,
        text=True,
        timeout=60,
    )


def a_sale_that_ended(make_event: Any) -> tuple[Event, str]:
    """Joins, admissions, a checkout, a fan who leaves, a place link, the close and the line
    revoked; the on-sale, and the ticket of the one fan still in the shop."""
    event = make_event(slug="tour", capacity=2, rate_per_minute=0, heartbeat_seconds=600)
    tickets = fans_join(event.slug, 6)
    tick(event)
    admitted = [t for t in tickets if entry_of(t).status == "admitted"]
    assert len(admitted) == 2
    shop_completes(poll(admitted[0])["pass"], event.integration_key)
    waiting = [t for t in tickets if entry_of(t).status == "waiting"]
    APIClient().delete(f"/api/v1/tickets/{waiting[0]}")
    place_link_for(entry_of(waiting[1]))
    event_close(event=event, actor="staff:ann", now=timezone.now())
    tick(event)  # the closed line revoked
    event.refresh_from_db()
    return event, admitted[1]


def archive_onsale(slug: str, *args: str) -> str:
    out = StringIO()
    call_command("archive_onsale", slug, *args, stdout=out)
    return out.getvalue()


def lines_of(archive: Path) -> list[bytes]:
    return gzip.decompress(archive.read_bytes()).splitlines(keepends=True)


def rewritten(archive: Path, lines: list[bytes], name: str) -> Path:
    changed = archive.with_name(name)
    changed.write_bytes(gzip.compress(b"".join(lines)))
    return changed


@pytest.mark.parametrize("lanes", [1, 4])
def test_an_ended_sale_archived_verifies_from_the_file_alone(
    make_event, tmp_path: Path, redis_client, hot_prefix: str
) -> None:
    event, in_shop = a_sale_that_ended(make_event)

    def hot_keys() -> list[bytes]:
        tags = [f"{event.id}"] + [f"{event.id}.{lane}" for lane in range(1, event.lanes)]
        return [
            k for tag in tags for k in redis_client.scan_iter(match=f"{hot_prefix}:{{{tag}}}:*")
        ]

    assert hot_keys()
    # One fan is still in the shop: not yet.
    with pytest.raises(CommandError, match="still has 1 fan"):
        archive_onsale(event.slug, "--out", str(tmp_path / "early.jsonl.gz"))
    shop_completes(poll(in_shop)["pass"], event.integration_key, outcome="abandoned")
    assert not QueueEntry.objects.filter(event=event, status__in=LIVE).exists()
    records = AuditRecord.objects.filter(event=event).count()
    entries = QueueEntry.objects.filter(event=event).count()
    identities = set(QueueEntry.objects.filter(event=event).values_list("identity", flat=True))

    archive = tmp_path / "tour.jsonl.gz"
    said = archive_onsale(event.slug, "--out", str(archive))

    checked = outsider_checks(archive, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    event.refresh_from_db()
    digest = hashlib.sha256(b"".join(lines_of(archive)[:-1])).hexdigest()
    assert event.archived_at is not None and event.archive["sha256"] == digest
    assert f"sha256 {digest}" in checked.stdout and digest in said
    # With lanes, the archive ends with a root record over every lane.
    assert event.archive["records"] == records + (1 if event.lanes > 1 else 0)
    assert event.archive["entries"] == entries
    root = AuditChainHead(seq=event.archive["heads"]["root"]["seq"])
    assert f"seq {root.seq}, hash {event.archive['heads']['root']['hash']}" in checked.stdout
    # The rows are gone, and the hot index's keys; the on-sale stays.
    assert hot_keys() == []
    for model in (QueueEntry, AuditRecord, AuditChainHead, AuditLaneHead):
        assert not model.objects.filter(event_id=event.id).exists()
    assert not PlaceLink.objects.filter(entry__event_id=event.id).exists()
    # Nothing a fan could be reached or told apart by is in the file.
    text = gzip.decompress(archive.read_bytes()).decode()
    for field in ("identity", "notify_email", "address", "holder_key", "return_url"):
        assert f'"{field}"' not in text
    assert not any(identity in text for identity in identities)


@pytest.fixture
def archived(make_event, tmp_path: Path) -> tuple[Event, Path]:
    event, in_shop = a_sale_that_ended(make_event)
    shop_completes(poll(in_shop)["pass"], event.integration_key)
    archive = tmp_path / "tour.jsonl.gz"
    archive_onsale(event.slug, "--out", str(archive))
    event.refresh_from_db()
    return event, archive


def _record_lines(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.startswith(b'{"record"')]


def test_a_byte_changed_in_one_record_is_refused(archived, tmp_path: Path) -> None:
    _, archive = archived
    lines = lines_of(archive)
    joined = next(i for i in _record_lines(lines) if b'"action":"joined"' in lines[i])
    lines[joined] = lines[joined].replace(b'"order_key":', b'"order_key":9', 1)
    checked = outsider_checks(rewritten(archive, lines, "one-byte.jsonl.gz"), tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "FAILED" in checked.stdout and "its hash is not sha256" in checked.stdout


def test_a_record_removed_is_refused(archived, tmp_path: Path) -> None:
    _, archive = archived
    lines = lines_of(archive)
    del lines[_record_lines(lines)[3]]
    checked = outsider_checks(rewritten(archive, lines, "removed.jsonl.gz"), tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "record(s) missing between them" in checked.stdout


def test_the_last_record_removed_with_a_new_digest_is_refused(archived, tmp_path: Path) -> None:
    """Cut from the end and the end line made up again: the chain no longer reaches the head
    the header lists (and the room keeps)."""
    _, archive = archived
    lines = lines_of(archive)
    last = _record_lines(lines)[-1]
    del lines[last]
    body = lines[:-1]
    end = json.loads(lines[-1])["end"]
    end["records"] -= 1
    end["sha256"] = hashlib.sha256(b"".join(body)).hexdigest()
    lines = [
        *body,
        (json.dumps({"end": end}, sort_keys=True, separators=(",", ":")) + "\n").encode(),
    ]
    checked = outsider_checks(rewritten(archive, lines, "cut.jsonl.gz"), tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "the header says at seq" in checked.stdout


def test_a_file_cut_short_is_refused(archived, tmp_path: Path) -> None:
    _, archive = archived
    cut = archive.with_name("short.jsonl.gz")
    cut.write_bytes(archive.read_bytes()[:-40])
    checked = outsider_checks(cut, tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr


def test_an_archive_is_refused_while_the_sale_is_live(make_event, tmp_path: Path) -> None:
    event = make_event(slug="live")
    fans_join(event.slug, 2)
    with pytest.raises(CommandError, match="has not ended"):
        archive_onsale(event.slug, "--out", str(tmp_path / "live.jsonl.gz"))
    assert not (tmp_path / "live.jsonl.gz").exists()
    assert QueueEntry.objects.filter(event=event).count() == 2
    with pytest.raises(CommandError, match="no such on-sale"):
        archive_onsale("nowhere")


def test_a_dry_run_writes_the_file_and_removes_nothing(make_event, tmp_path: Path) -> None:
    event, in_shop = a_sale_that_ended(make_event)
    shop_completes(poll(in_shop)["pass"], event.integration_key)
    records = AuditRecord.objects.filter(event=event).count()
    said = archive_onsale(event.slug, "--out", str(tmp_path / "dry.jsonl.gz"), "--dry-run")
    assert "nothing removed" in said
    assert outsider_checks(tmp_path / "dry.jsonl.gz", tmp_path).returncode == 0
    event.refresh_from_db()
    assert event.archived_at is None
    assert AuditRecord.objects.filter(event=event).count() == records


def test_an_archived_sale_says_so_with_its_digest(archived) -> None:
    event, _ = archived
    auditor = staff_client("audrey", api=True, **AUDITOR)
    for url in (
        f"/api/v1/audit/events/{event.slug}/verify",
        f"/api/v1/audit/events/{event.slug}/report",
        f"/api/v1/audit/records/?event={event.slug}",
    ):
        answer = auditor.get(url)
        assert answer.status_code == 410, (url, answer.content)
        body = answer.json()
        assert body["error"] == "event_archived"
        assert body["archive"]["sha256"] == event.archive["sha256"]
        assert event.archive["sha256"] in body["detail"]
    with pytest.raises(CommandError, match="was archived"):
        archive_onsale(event.slug, "--dry-run")


def test_the_dashboard_says_archived_with_the_digest(archived) -> None:
    event, _ = archived
    staff = staff_client("ann", superuser=True)
    digest = event.archive["sha256"]
    for url in (
        f"/dashboard/events/{event.slug}/",
        f"/dashboard/events/{event.slug}/report",
        "/dashboard/audit/",
    ):
        page = staff.get(url)
        assert page.status_code in (200, 410), (url, page.status_code)
        assert digest in page.content.decode(), url
    assert staff.get(f"/dashboard/events/{event.slug}/report").status_code == 410


def test_an_archived_sale_can_no_longer_change(archived) -> None:
    event, _ = archived
    staff = staff_client("ann", superuser=True, api=True)
    answer = staff.patch(f"/api/v1/manage/events/{event.slug}/", {"name": "Renamed"}, format="json")
    assert answer.status_code == 410 and answer.json()["error"] == "event_archived"
    event.refresh_from_db()
    assert event.name == "On-sale tour"


def test_the_room_reads_its_file_back_before_removing_anything(make_event, tmp_path) -> None:
    """The check that guards the removal (``archive_file_problem``) refuses a file that is not
    what the database holds: a changed record, a chain ending elsewhere, a cut end."""
    event, in_shop = a_sale_that_ended(make_event)
    shop_completes(poll(in_shop)["pass"], event.integration_key)
    archive = tmp_path / "dry.jsonl.gz"
    archive_onsale(event.slug, "--out", str(archive), "--dry-run")
    heads = chain_heads(event_id=event.id).as_json()
    end = json.loads(lines_of(archive)[-1])["end"]
    counts = {"records": end["records"], "entries": end["entries"]}
    assert archive_file_problem(archive, heads=heads, **counts) == ""

    lines = lines_of(archive)
    joined = next(i for i in _record_lines(lines) if b'"action":"joined"' in lines[i])
    lines[joined] = lines[joined].replace(b'"actor":"fan"', b'"actor":"fan2"')
    changed = rewritten(archive, lines, "changed.jsonl.gz")
    assert "does not hash" in archive_file_problem(changed, heads=heads, **counts)

    moved = {**heads, "root": {"seq": heads["root"]["seq"] + 1, "hash": "0" * 64}}
    assert "heads" in archive_file_problem(archive, heads=moved, **counts)

    cut = archive.with_name("cut.jsonl.gz")
    cut.write_bytes(archive.read_bytes()[:-30])
    assert archive_file_problem(cut, heads=heads, **counts).startswith("unreadable")


def archived_settings(slug: str, archive: Path) -> dict[str, Any]:
    archive_onsale(slug, "--out", str(archive), "--dry-run")
    return json.loads(lines_of(archive)[0])["archive"]["event"]


def test_a_draw_is_archived_with_its_window_and_its_seed_revealed(make_event, tmp_path) -> None:
    event = make_event(slug="drawn")
    window = registration_drawn(event, by_shop=3, winners=1, waitlist=1)
    event_close(event=event, actor="staff:ann", now=timezone.now())
    settings = archived_settings(event.slug, tmp_path / "drawn.jsonl.gz")
    assert settings["draw_seed"] == event.draw_seed
    assert settings["draw_seed_sha256"] == event.draw_seed_sha256
    assert settings["registration_window"] == {
        "opens_at": hashed_at(window.opens_at),
        "closes_at": hashed_at(window.closes_at),
        "winners": 1,
        "waitlist": 1,
        "invitation_hours": 48,
        "drawn_at": hashed_at(window.drawn_at),
        "list_root": window.list_root,
        "list_count": 3,
    }
    text = gzip.decompress((tmp_path / "drawn.jsonl.gz").read_bytes()).decode()
    assert window.shop_key not in text and window.identity_key not in text
    checked = outsider_checks(tmp_path / "drawn.jsonl.gz", tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_an_undrawn_window_keeps_the_draws_seed_secret(make_event, tmp_path) -> None:
    event = make_event(slug="undrawn")
    registration_window_open(event)
    registrations_made(event, by_shop=2)
    event_close(event=event, actor="staff:ann", now=timezone.now())
    settings = archived_settings(event.slug, tmp_path / "undrawn.jsonl.gz")
    assert settings["draw_seed"] is None
    assert settings["draw_seed_sha256"] == event.draw_seed_sha256
    assert settings["registration_window"]["drawn_at"] is None
    assert settings["registration_window"]["list_count"] is None
    text = gzip.decompress((tmp_path / "undrawn.jsonl.gz").read_bytes()).decode()
    assert event.draw_seed not in text


def test_an_on_sale_sold_first_come_is_archived_without_a_window(archived) -> None:
    event, archive = archived
    settings = json.loads(lines_of(archive)[0])["archive"]["event"]
    assert settings["registration_window"] is None and settings["draw_seed"] is None
    assert settings["draw_seed_sha256"] == event.draw_seed_sha256


def test_a_draw_whose_invitations_joined_the_line_is_archived_and_still_checkable(
    make_event, tmp_path
) -> None:
    event = make_event(slug="invited", capacity=0)
    registration_drawn(event, by_shop=4, winners=2, waitlist=1)
    invitations_settled(event, used=2)
    used = list(Invitation.objects.filter(event=event, status="used"))
    assert len(used) == 2 and all(i.entry_id for i in used)
    for invitation in used:
        entry = invitation.entry
        ref = TicketRef(
            entry_id=entry.id, event_id=event.id, tier_id=entry.tier_id, lane=entry.lane
        )
        entry_leave(ref=ref, now=timezone.now())
    event_close(event=event, actor="staff:ann", now=timezone.now())
    archive_onsale(event.slug, "--out", str(tmp_path / "invited.jsonl.gz"))
    event.refresh_from_db()
    assert event.archived_at is not None
    assert not QueueEntry.objects.filter(event=event).exists()
    # The draw's publication stays: the invitations used, without the entries they joined as.
    assert list(Invitation.objects.filter(event=event).values_list("status", "entry")) == [
        ("used", None),
        ("used", None),
    ]
    draw = APIClient().get(f"/api/v1/events/{event.slug}/draw")
    assert draw.status_code == 200 and draw.json()["count"] == 4
