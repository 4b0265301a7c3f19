"""scripts/verify_draw.py, the draw checked from outside: a window of a few thousand
registrations by both routes drawn by the room, its publication fetched as an outsider would,
and the script, run by a bare ``python3 -I`` away from the project, recomputing the room's
winners and waitlist and checking inclusion proofs; a tampered publication fails."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from queueing.line.draw import draws_run
from queueing.models import Registration
from tests.helpers import registration_window_open, registrations_made
from tests.processes import ROOT

pytestmark = pytest.mark.django_db

SCRIPT = ROOT / "scripts" / "verify_draw.py"
PYTHON = "/usr/bin/python3"


def published(slug: str, proofs: list[str]) -> str:
    """The draw, its list's pages, the proofs asked for and the on-sale (whose
    ``draw_seed_sha256`` is the commitment published from creation), one JSON a line."""
    client = Client()
    documents = [client.get(f"/api/v1/events/{slug}/draw").json()]
    url = f"/api/v1/events/{slug}/draw/registrations"
    while url:
        page = client.get(url).json()
        documents.append(page)
        url = page["next"]
    documents += [client.get(f"/api/v1/registrations/{r}/proof").json() for r in proofs]
    documents.append(client.get(f"/api/v1/events/{slug}").json())
    return "\n".join(json.dumps(d) for d in documents)


def verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-I", str(SCRIPT), str(path)], capture_output=True, text=True, cwd=path.parent
    )


def test_an_outsider_recomputes_the_winners_and_waitlist_of_a_few_thousand(event, tmp_path) -> None:
    window = registration_window_open(event, winners=200, waitlist=100)
    started = time.perf_counter()
    made = registrations_made(event, by_mail=1000, by_shop=1000)
    registering = time.perf_counter() - started
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    started = time.perf_counter()
    assert draws_run(now=timezone.now()) == [event.id]
    drawing = time.perf_counter() - started
    file = tmp_path / "draw.json"
    file.write_text(
        published(event.slug, [str(made[0].registration.id), str(made[-1].registration.id)])
    )
    started = time.perf_counter()
    result = verify(file)
    checking = time.perf_counter() - started
    print(
        f"2000 registrations {registering:.2f} s, draw {drawing:.2f} s, "
        f"outsider's check {checking:.2f} s"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the draw holds" in result.stdout and result.stdout.count("): holds") == 2
    room = Registration.objects.filter(event=event)
    won = list(
        room.filter(outcome="won").order_by("draw_rank").values_list("public_hash", flat=True)
    )
    waiting = list(
        room.filter(outcome="waitlisted")
        .order_by("draw_rank")
        .values_list("public_hash", flat=True)
    )
    assert re.findall(r"^  won (\w+)$", result.stdout, re.M) == won and len(won) == 200
    assert (
        re.findall(r"^  waitlisted (\w+)$", result.stdout, re.M) == waiting and len(waiting) == 100
    )


def test_a_tampered_publication_fails(event, tmp_path) -> None:
    window = registration_window_open(event, winners=2, waitlist=1)
    made = registrations_made(event, by_mail=3, by_shop=3)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    draws_run(now=timezone.now())
    text = published(event.slug, [str(made[0].registration.id)])
    file = tmp_path / "draw.json"
    # A loser published as a winner.
    file.write_text(text.replace('"outcome": "lost"', '"outcome": "won"', 1))
    assert verify(file).returncode == 1 and "FAILED" in verify(file).stdout
    # The list changed after its commitment: one registration left out.
    documents = [json.loads(line) for line in text.splitlines()]
    documents[1]["results"].pop()
    documents[0]["count"] -= 1
    file.write_text("\n".join(json.dumps(d) for d in documents))
    assert "Merkle root" in verify(file).stdout
    # Another seed than the one committed at creation.
    documents = [json.loads(line) for line in text.splitlines()]
    documents[0]["draw_seed"] = "0" * 64
    file.write_text("\n".join(json.dumps(d) for d in documents))
    result = verify(file)
    assert result.returncode == 1
    assert "draw_seed does not hash to the draw_seed_sha256" in result.stdout
    # The same seed with a commitment made up to match it: the on-sale published another.
    documents[0]["draw_seed_sha256"] = hashlib.sha256(b"0" * 64).hexdigest()
    file.write_text("\n".join(json.dumps(d) for d in documents))
    result = verify(file)
    assert result.returncode == 1 and "different draw_seed_sha256" in result.stdout
    # The shuffle's seed in the draw's place: not the draw's commitment either.
    documents = [json.loads(line) for line in text.splitlines()]
    event.refresh_from_db()
    documents[0]["draw_seed"] = event.shuffle_seed
    file.write_text("\n".join(json.dumps(d) for d in documents))
    assert verify(file).returncode == 1
