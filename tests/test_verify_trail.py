"""scripts/verify_trail.py, the trail checked from outside: run as an outsider would, by a bare
``python3 -I`` away from the project, on what the auditors' API exported of a real sale; and
docs/api.md's worked example of the canonical form, which must still verify."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from queueing.beat import event_beat, event_tick
from queueing.models import AuditAction, AuditRecord
from queueing.records.audit import (
    AuditItem,
    audit_append_many,
    audit_lane_heads_ensure,
    canonical_record,
    chain_hash,
)
from queueing.rules.merkle import LaneHead, merkle_leaf, merkle_root
from staff.services import TierSpec, event_update
from tests.helpers import AUDITOR, fans_join, join, new_fan, poll, shop_completes, staff_client
from tests.processes import ROOT

pytestmark = pytest.mark.django_db

SCRIPT = ROOT / "scripts" / "verify_trail.py"
PYTHON = "/usr/bin/python3"
RECORDS = "/api/v1/audit/records/"


def verify(path: Path | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The script as an outsider runs it: the system's Python, isolated (no site packages, no
    environment, not the project's directory on its path), in a directory of its own."""
    return subprocess.run(
        [PYTHON, "-I", str(SCRIPT), str(path)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def a_real_sale(make_event: Any) -> None:
    """Two on-sales whose records interleave: joins, an admission, a checkout, a fan who
    leaves, a tier and a message with characters beyond ASCII."""
    first = make_event(
        slug="tour", capacity=1, rate_per_minute=0, tiers=[TierSpec(name="Général", priority=0)]
    )
    second = make_event(slug="gala")
    tickets = fans_join(first.slug, 3)
    fans_join(second.slug, 2)
    event_tick(event_id=first.id, now=timezone.now())
    shop_completes(poll(tickets[0])["pass"], first.integration_key)
    APIClient().delete(f"/api/v1/tickets/{tickets[2]}")
    event_update(
        event=second, actor="staff:ann", now=timezone.now(), changes={"message": "Bientôt ☕"}
    )
    fans_join(second.slug, 1)


def export_pages(auditor: APIClient, **params: Any) -> bytes:
    """Every page of the records, each body as the API sent it, one after the other: what
    ``curl ... >> trail.json`` over the ``next`` links leaves."""
    bodies = []
    response = auditor.get(RECORDS, {"page_size": 4, **params})
    while True:
        assert response.status_code == 200
        bodies.append(response.content)
        following = response.json()["next"]
        if not following:
            return b"\n".join(bodies)
        response = auditor.get(following)


def export_csv(auditor: APIClient) -> str:
    response = auditor.get(RECORDS, {"format": "csv"})
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def auditor() -> APIClient:
    return staff_client("audrey", api=True, **AUDITOR)


def _records(pages: bytes) -> list[dict[str, Any]]:
    decoder, text, position, found = json.JSONDecoder(), pages.decode(), 0, []
    while position < len(text):
        page, position = decoder.raw_decode(text, position)
        found += page["results"]
        while position < len(text) and text[position].isspace():
            position += 1
    return found


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def test_a_real_trail_exported_as_pages_verifies(make_event, auditor, tmp_path: Path) -> None:
    a_real_sale(make_event)
    trail = tmp_path / "trail.json"
    trail.write_bytes(export_pages(auditor))
    result = verify(trail, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    total = AuditRecord.objects.count()
    assert f"OK: {total} records in 2 chain(s)" in result.stdout
    assert result.stdout.count("from the chain's start") == 2
    # The records carry what the hash covers, in the form hashed.
    record = _records(trail.read_bytes())[0]
    assert {"event_id", "seq", "at_hashed"} <= set(record)
    assert record["seq"] == 1 and re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", record["at_hashed"]
    )


def test_a_real_trail_exported_as_csv_verifies(make_event, auditor, tmp_path: Path) -> None:
    a_real_sale(make_event)
    text = export_csv(auditor)
    rows = list(csv.DictReader(io.StringIO(text)))
    changed = next(r for r in rows if r["action"] == "event_changed")
    # ``data`` is the canonical JSON: sorted keys, no spaces, characters as themselves.
    assert "Bientôt ☕" in changed["data"] and ", " not in changed["data"]
    trail = tmp_path / "audit.csv"
    trail.write_text(text, encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"OK: {len(rows)} records in 2 chain(s)" in result.stdout


def _tampered(records: list[dict[str, Any]], how: str) -> tuple[list[dict[str, Any]], str]:
    """The records with one thing changed, and how the verifier must name the first bad one."""
    records = [dict(r) for r in records]
    tour = [i for i, r in enumerate(records) if r["event"] == "tour"]
    k = tour[4]  # a record in the middle of a chain: one of the joins
    target = records[k]
    if how == "hash":
        target["hash"] = ("1" if target["hash"][0] != "1" else "2") + target["hash"][1:]
    elif how == "data":
        target["data"] = json.loads(
            json.dumps(target["data"], ensure_ascii=False).replace("Général", "Génèral")
        )
        assert target["data"]["tier"] == "Génèral"
    elif how == "at":
        digit = target["at_hashed"][-7]
        new = str((int(digit) + 1) % 10)
        target["at_hashed"] = target["at_hashed"][:-7] + new + target["at_hashed"][-6:]
        target["at"] = target["at_hashed"]
    elif how == "removed":
        del records[k]
        target = records[tour[5] - 1]  # the record after the one removed is the first wrong
    elif how == "swapped":
        records[k], records[tour[5]] = records[tour[5]], records[k]
        target = records[k]
    return records, f"id {target['id']}, seq {target['seq']}"


@pytest.mark.parametrize("how", ["hash", "data", "at", "removed", "swapped"])
def test_one_change_fails_and_names_the_record(make_event, auditor, tmp_path, how) -> None:
    a_real_sale(make_event)
    records = _records(export_pages(auditor))
    if how == "data":
        assert any("Général" in json.dumps(r["data"], ensure_ascii=False) for r in records)
    records, named = _tampered(records, how)
    trail = tmp_path / "trail.jsonl"
    trail.write_text(_lines(records), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAILED at record {named} " in result.stdout, result.stdout


def test_one_character_changed_in_the_csv_fails(make_event, auditor, tmp_path: Path) -> None:
    a_real_sale(make_event)
    text = export_csv(auditor)
    rows = list(csv.DictReader(io.StringIO(text)))
    target = next(r for r in rows if r["action"] == "event_changed")
    line = next(line for line in text.splitlines() if line.startswith(f"{target['id']},"))
    assert "Bientôt" in line
    trail = tmp_path / "audit.csv"
    trail.write_text(text.replace(line, line.replace("Bientôt", "Bientot")), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert f"FAILED at record id {target['id']}, seq {target['seq']} " in result.stdout
    assert "its hash is not sha256" in result.stdout


def test_an_export_from_a_later_record_is_checked_from_there(
    make_event, auditor, tmp_path: Path
) -> None:
    a_real_sale(make_event)
    records = [r for r in _records(export_pages(auditor, event="tour")) if r["seq"] >= 3]
    trail = tmp_path / "later.json"
    trail.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "from seq 3: the records before it are not in the file" in result.stdout
    # Its first record's own contents are still recomputed.
    records[0]["actor"] = "someone else"
    trail.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    assert verify(trail, tmp_path).returncode == 1


def _lane_record(event_id: int, lane: Any, seq: int, prev_hash: str, n: int) -> dict[str, Any]:
    """A record as a trail with lanes would carry it, hashed by the rule docs/api.md states,
    written out here again rather than taken from the script under test."""
    fields = {
        "event_id": event_id,
        "seq": seq,
        "at_hashed": f"2026-11-21T18:00:{n:02d}.000100+00:00",
        "ticket_id": f"00000000-0000-4000-8000-{n:012d}",
        "action": "joined",
        "actor": "fan",
        "data": {"tier": "Général", "order_key": n},
        "prev_hash": prev_hash,
    }
    hashed = {
        "action": "joined",
        "actor": "fan",
        "at": fields["at_hashed"],
        "data": fields["data"],
        "event": event_id,
        "seq": seq,
        "ticket_id": fields["ticket_id"],
    }
    if lane is not None:
        fields["lane"] = hashed["lane"] = lane
    canonical = json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    fields["hash"] = hashlib.sha256((prev_hash + canonical).encode()).hexdigest()
    return {"id": n, **fields}


def _two_lanes() -> list[dict[str, Any]]:
    """On-sale 7 in lanes "a" and 2, on-sale 8 without lanes, all interleaved."""
    heads: dict[Any, tuple[int, str]] = {}
    records = []
    for n, (event_id, lane) in enumerate(
        [(7, "a"), (7, 2), (7, 2), (8, None), (7, "a"), (7, 2), (8, None), (7, "a")], start=1
    ):
        seq, prev = heads.get((event_id, lane), (0, "0" * 64))
        record = _lane_record(event_id, lane, seq + 1, prev, n)
        heads[(event_id, lane)] = (seq + 1, record["hash"])
        records.append(record)
    return records


def test_lanes_are_chains_of_their_own_and_may_interleave(tmp_path: Path) -> None:
    records = _two_lanes()
    trail = tmp_path / "lanes.json"
    # As two pages of the API, appended one after the other.
    pages = [{"next": "…", "previous": None, "results": records[:5]}]
    pages.append({"next": None, "previous": "…", "results": records[5:]})
    trail.write_text("".join(json.dumps(p) for p in pages), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK: 8 records in 3 chain(s)" in result.stdout
    assert 'on-sale 7 lane "a": seq 1 to 3' in result.stdout
    assert "on-sale 7 lane 2: seq 1 to 3" in result.stdout
    assert "on-sale 8: seq 1 to 2" in result.stdout

    # The lane is covered by the hash: moved to the other lane, the record no longer verifies.
    records[5]["lane"] = "a"
    trail.write_text(_lines(records), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert 'FAILED at record id 6, seq 3, lane "a" ' in result.stdout
    assert "its hash is not sha256" in result.stdout

    # A lane's record out of its place: the other lanes do not hide it.
    records = _two_lanes()
    records[1], records[2] = records[2], records[1]
    trail.write_text(_lines(records), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert "FAILED at record id 2, seq 1, lane 2 " in result.stdout
    assert "seq 1 comes after seq 2: out of order" in result.stdout


def test_a_repeated_page_is_a_repeated_seq(tmp_path: Path) -> None:
    records = _two_lanes()
    trail = tmp_path / "twice.json"
    trail.write_text(json.dumps(records) + json.dumps(records[-2:]), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert "FAILED at record id 7, seq 2 " in result.stdout and "seq 2 repeats" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ("", "no audit records"),
        ('{"next": null, "previous": null, "results": []}', "no audit records"),
        ('{"results": [', "not JSON"),
        ("id,at,event\n1,2,3\n", "no column"),
        ("\xff", "not UTF-8"),
    ],
)
def test_what_is_not_a_trail_is_exit_2(tmp_path: Path, content: str | None, message: str) -> None:
    trail = tmp_path / "trail"
    if content == "\xff":
        trail.write_bytes(b"\xff\xfe{")
    elif content is not None:
        trail.write_text(content, encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 2
    assert message in result.stderr


def test_bad_usage_is_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [PYTHON, "-I", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "usage:" in result.stderr


# The worked example in docs/api.md.


def _doc_block(text: str, name: str) -> str:
    """The fenced block after ``<!-- trail example: name -->``."""
    marker = name if name.startswith("root example:") else f"trail example: {name}"
    after = text.split(f"<!-- {marker} -->", 1)[1]
    match = re.match(r"\s*```[a-z]*\n(.*?)\n```", after, re.S)
    assert match, f"no block after the {name} marker"
    return match.group(1)


def test_the_docs_worked_example_still_verifies(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    record = json.loads(_doc_block(text, "record"))
    canonical = _doc_block(text, "canonical")
    prev_hash = _doc_block(text, "prev_hash")
    digest = _doc_block(text, "hash")
    # The canonical string is what the room itself hashes for that record...
    assert canonical == canonical_record(
        event_id=record["event_id"],
        seq=record["seq"],
        at=timezone.datetime.fromisoformat(record["at_hashed"]),
        ticket_id=record["ticket_id"],
        action=record["action"],
        actor=record["actor"],
        data=record["data"],
    )
    # ... the hash follows from it as stated, and is the record's ...
    assert prev_hash == record["prev_hash"]
    assert hashlib.sha256((prev_hash + canonical).encode()).hexdigest() == digest
    assert chain_hash(prev_hash, canonical) == digest == record["hash"]
    # ... and the script agrees.
    example = tmp_path / "example.json"
    example.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    result = verify(example, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# A trail with lanes, as the room exports it.


def a_sale_in_lanes(make_event: Any) -> Any:
    """An on-sale with three lanes: records in each, root records written by its tick
    between them, and records after the last root."""
    event = make_event(slug="lanes", lanes=3)
    audit_lane_heads_ensure(event_id=event.id, lanes=3)
    for round_lanes in ((0, 1, 1), (2, 0), (1,)):
        for lane in round_lanes:
            with transaction.atomic():
                audit_append_many(
                    event_id=event.id,
                    actor="fan",
                    at=timezone.now(),
                    lane=lane,
                    items=[AuditItem(action=AuditAction.JOINED, data={"lane": lane})] * 2,
                )
        event_beat(event_id=event.id, now=timezone.now())
    return event


def _export(auditor: APIClient, slug: str) -> list[dict[str, Any]]:
    pages = export_pages(auditor, event=slug).decode().split("\n")
    return [record for page in pages for record in json.loads(page)["results"]]


def test_a_trail_in_lanes_verifies_with_its_roots(make_event: Any, tmp_path: Path) -> None:
    event = a_sale_in_lanes(make_event)
    auditor = staff_client("audrey", api=True, **AUDITOR)
    trail = tmp_path / "lanes.json"
    trail.write_bytes(export_pages(auditor, event=event.slug))
    result = verify(trail, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "in 4 chain(s)" in result.stdout
    assert f"on-sale {event.id} lane 1: seq 1 to 6" in result.stdout
    # Three roots of three lanes: every head they list (8 not empty) is a record of the file.
    assert "3 root record(s): every Merkle root holds over the heads it lists; 8 listed" in (
        result.stdout
    )
    csv_trail = tmp_path / "lanes.csv"
    csv_trail.write_text(export_csv(auditor), encoding="utf-8")
    assert verify(csv_trail, tmp_path).returncode == 0


def test_a_lane_cut_short_behind_a_root_fails(make_event: Any, tmp_path: Path) -> None:
    event = a_sale_in_lanes(make_event)
    auditor = staff_client("audrey", api=True, **AUDITOR)
    records = _export(auditor, event.slug)
    # Lane 1's last two records gone: the lane alone still links, but the last root lists it.
    last_two = [r for r in records if r["lane"] == 1][-2:]
    kept = [r for r in records if r not in last_two]
    trail = tmp_path / "cut.json"
    trail.write_text(_lines(kept), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert f"lists on-sale {event.id} lane 1 at seq 6, beyond that lane's last record" in (
        result.stdout
    )


def test_a_forged_root_fails_though_its_chain_was_rehashed(make_event: Any, tmp_path: Path):
    event = a_sale_in_lanes(make_event)
    auditor = staff_client("audrey", api=True, **AUDITOR)
    records = _export(auditor, event.slug)
    root = next(r for r in records if r["action"] == "root")
    root["data"]["lanes"][0]["hash"] = "e" * 64  # a lane head that is not the lane's
    _rehash_chain_from(records, root)
    trail = tmp_path / "forged.json"
    trail.write_text(_lines(records), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert f"FAILED at record id {root['id']}" in result.stdout
    assert "its merkle_root is not the Merkle root over the lane heads it lists" in result.stdout
    # Its Merkle root made to match: the head it lists is still not the lane's record.
    heads = root["data"]["lanes"]
    root["data"]["merkle_root"] = merkle_root(
        [LaneHead(lane=h["lane"], seq=h["seq"], hash=h["hash"]) for h in heads]
    )
    _rehash_chain_from(records, root)
    trail.write_text(_lines(records), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert f"the hash it lists for on-sale {event.id} lane 0 at seq 2 is not that record's" in (
        result.stdout
    )


def test_a_lanes_record_edited_fails_at_it(make_event: Any, tmp_path: Path) -> None:
    event = a_sale_in_lanes(make_event)
    auditor = staff_client("audrey", api=True, **AUDITOR)
    records = _export(auditor, event.slug)
    target = next(r for r in records if r["lane"] == 2)
    target["actor"] = "someone else"
    trail = tmp_path / "edited.json"
    trail.write_text(_lines(records), encoding="utf-8")
    result = verify(trail, tmp_path)
    assert result.returncode == 1
    assert f"FAILED at record id {target['id']}, seq 1, lane 2 " in result.stdout


def _rehash_chain_from(records: list[dict[str, Any]], first: dict[str, Any]) -> None:
    """A forger's work: every hash of ``first``'s chain recomputed from it on."""
    chain = [
        r
        for r in records
        if r["lane"] == first["lane"]
        and r["event_id"] == first["event_id"]
        and r["seq"] >= first["seq"]
    ]
    prev = first["prev_hash"]
    for record in chain:
        record["prev_hash"] = prev
        record["hash"] = chain_hash(
            prev,
            canonical_record(
                event_id=record["event_id"],
                seq=record["seq"],
                at=timezone.datetime.fromisoformat(record["at_hashed"]),
                ticket_id=record["ticket_id"],
                action=record["action"],
                actor=record["actor"],
                data=record["data"],
                lane=record["lane"],
            ),
        )
        prev = record["hash"]


def test_the_docs_root_example_is_the_rule_of_the_room_and_of_the_script() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    data = json.loads(_doc_block(text, "root example: data").strip())
    heads = [LaneHead(lane=h["lane"], seq=h["seq"], hash=h["hash"]) for h in data["lanes"]]
    assert merkle_root(heads) == data["merkle_root"]
    spec = importlib.util.spec_from_file_location("verify_trail", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.merkle_root(data["lanes"]) == data["merkle_root"]
    *leaves, node, root = _doc_block(text, "root example: steps").splitlines()
    for line, head in zip(leaves, heads, strict=True):
        hashed, digest = line.split(" ")
        assert hashed == f"leaf:{head.lane}:{head.seq}:{head.hash}"
        assert digest == merkle_leaf(head)
    first, second, third = (line.split(" ")[1] for line in leaves)
    assert node == f"node {hashlib.sha256((first + second).encode()).hexdigest()}"
    assert root == f"root {hashlib.sha256((node[5:] + third).encode()).hexdigest()}"
    assert root == f"root {data['merkle_root']}"


def verify_order(path: Path, seed: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-I", str(SCRIPT), str(path), "--seed", seed],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_random_lines_order_is_checked_from_the_revealed_seed(
    make_event, auditor, settings, tmp_path: Path
) -> None:
    settings.WR_ADMISSION_BATCH = 7
    event = make_event(
        slug="draw",
        queue_order="random",
        capacity=0,
        rate_per_minute=0,
        heartbeat_seconds=3600,
        tiers=[TierSpec("VIP", priority=1, access_codes=["VIP"]), TierSpec("General")],
    )
    fans_join(event.slug, 25)
    fans_join(event.slug, 5, {"access_code": "VIP"})
    event_tick(event_id=event.id, now=timezone.now())
    fans_join(event.slug, 10)  # some land ahead of fans let in already
    for _ in range(10):
        event_tick(event_id=event.id, now=timezone.now())
    assert AuditRecord.objects.filter(event=event, action="admitted").count() == 40
    trail = tmp_path / "trail.json"
    trail.write_bytes(export_pages(auditor, event=event.slug))
    result = verify_order(trail, event.shuffle_seed, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Order: 40 first admissions, 0 not at their place, 0 of" in result.stdout
    # A seed other than the one committed to is refused.
    wrong = verify_order(trail, "not-the-seed", tmp_path)
    assert wrong.returncode == 1
    assert "not the shuffle_seed_sha256 committed to" in wrong.stdout
    # A recorded key that is not the ticket's place, or a run out of place order, is told
    # (checked apart from the hashes, which such an edit would break first).
    spec = importlib.util.spec_from_file_location("verify_trail", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    records = [script.Record(str(r["id"]), r) for r in _records(trail.read_bytes())]
    out = io.StringIO()
    assert script.check_order(records, event.shuffle_seed, out) == 0
    admitted = [r for r in records if r.fields["action"] == "admitted"]
    admitted[0].fields["data"]["order_key"] += 1
    out = io.StringIO()
    assert script.check_order(records, event.shuffle_seed, out) == 1
    assert f"Not its place: {admitted[0].where}" in out.getvalue()
    admitted[0].fields["data"]["order_key"] -= 1
    first, second = (
        admitted[0],
        next(
            r
            for r in admitted[1:]
            if r.fields["at_hashed"] == admitted[0].fields["at_hashed"]
            and r.fields["data"]["tier"] == admitted[0].fields["data"]["tier"]
        ),
    )
    position = [records.index(first), records.index(second)]
    records[position[0]], records[position[1]] = second, first
    out = io.StringIO()
    assert script.check_order(records, event.shuffle_seed, out) == 1
    assert "1 of" in out.getvalue()


def test_a_rejoin_that_kept_its_place_is_checked_and_a_place_is_taken_once(
    make_event, auditor, tmp_path: Path
) -> None:
    event = make_event(
        slug="kept", queue_order="random", capacity=0, rate_per_minute=0, heartbeat_seconds=3600
    )
    fans = [new_fan() for _ in range(12)]
    tickets = [join(fan, event.slug).json()["ticket"] for fan in fans]
    # Three fans leave and join again: each keeps the place of the ticket they left.
    for fan, ticket in zip(fans[:3], tickets[:3], strict=True):
        assert fan.delete(f"/api/v1/tickets/{ticket}").status_code in (200, 204)
        assert join(fan, event.slug).json()["ticket"] != ticket
    for _ in range(5):
        event_tick(event_id=event.id, now=timezone.now())
    assert AuditRecord.objects.filter(event=event, action="admitted").count() == 12
    trail = tmp_path / "trail.json"
    trail.write_bytes(export_pages(auditor, event=event.slug))
    result = verify_order(trail, event.shuffle_seed, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Order: 12 first admissions, 0 not at their place, 0 of" in result.stdout
    # Were a second admission to name a place already taken, the check says so.
    spec = importlib.util.spec_from_file_location("verify_trail", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    records = [script.Record(str(r["id"]), r) for r in _records(trail.read_bytes())]
    kept = [
        r for r in records if r.fields["action"] == "joined" and "placed_by" in r.fields["data"]
    ]
    assert len(kept) == 3
    twice = kept[1].fields["data"]["placed_by"]
    kept[2].fields["data"]["placed_by"] = twice
    admitted = next(
        r
        for r in records
        if r.fields["action"] == "admitted" and r.fields["ticket_id"] == kept[2].fields["ticket_id"]
    )
    admitted.fields["data"]["order_key"] = next(
        r.fields["data"]["order_key"]
        for r in records
        if r.fields["action"] == "admitted" and r.fields["ticket_id"] == kept[1].fields["ticket_id"]
    )
    out = io.StringIO()
    assert script.check_order(records, event.shuffle_seed, out) == 1
    assert "A place taken twice" in out.getvalue()
