"""Rotating the secret key (docs/configuration.md, "Rotating the secret key"): what the old key
made (a fan's ticket, identity cookie and waiting page's cookie, a proof-of-work challenge, a
staff session) still reads while the old key is in DJANGO_SECRET_KEY_FALLBACKS, and no longer
once it is dropped; a place link, which the secret key does not key, lives its own life."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from queueing.web.abuse import ProofOfWorkInvalid, pow_challenge, pow_check, solves
from tests.helpers import entry_of, join, new_fan, staff_client

pytestmark = pytest.mark.django_db

OLD = "the-old-secret-key-" + "o" * 40
NEW = "the-new-secret-key-" + "n" * 40


def position_shown(client: Client, slug: str) -> bool:
    return 'id="position"' in client.get(f"/e/{slug}/").content.decode()


def rotated(settings, *, keep_old: bool) -> None:
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD] if keep_old else []


def test_a_fans_ticket_and_cookies_read_after_rotation_and_not_once_the_old_key_is_dropped(
    make_event, settings
) -> None:
    make_event(slug="rotate", capacity=0)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    fan = new_fan()
    ticket = join(fan, "rotate").json()["ticket"]
    page = new_fan()
    page.post("/e/rotate/")
    assert position_shown(page, "rotate")
    moved = page.post("/e/rotate/move").content.decode()
    link = re.search(r'id="place-link-url"[^>]*>[^<]*testserver([^<]+)<', moved).group(1)

    rotated(settings, keep_old=True)
    assert Client().get(f"/api/v1/tickets/{ticket}").status_code == 200
    # The identity cookie still reads: the same place (its ticket now sealed under the new key).
    again = join(fan, "rotate").json()["ticket"]
    assert entry_of(again).pk == entry_of(ticket).pk
    assert position_shown(page, "rotate")  # the page's cookie too
    assert Client().get(link).status_code == 200

    rotated(settings, keep_old=False)
    refused = Client().get(f"/api/v1/tickets/{ticket}")
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_ticket")
    # The browser's cookie no longer reads: it is a new fan, with a new place.
    assert entry_of(join(fan, "rotate").json()["ticket"]).pk != entry_of(again).pk
    assert not position_shown(page, "rotate")
    # A place link is a random token kept as its SHA-256: no key makes or breaks it.
    assert Client().get(link).status_code == 200


def test_a_proof_of_work_challenge_reads_after_rotation_and_not_once_dropped(
    make_event, settings
) -> None:
    event = make_event(slug="work", pow_difficulty=4)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    first, second = (pow_challenge(event).challenge for _ in range(2))

    def proof(challenge: str) -> dict[str, str]:
        nonce = next(str(n) for n in range(1 << 16) if solves(challenge, str(n), 4))
        return {"challenge": challenge, "nonce": nonce}

    rotated(settings, keep_old=True)
    pow_check(event=event, proof=proof(first))
    rotated(settings, keep_old=False)
    with pytest.raises(ProofOfWorkInvalid, match="not one of ours"):
        pow_check(event=event, proof=proof(second))


def test_a_staff_session_holds_after_rotation_and_ends_once_the_old_key_is_dropped(
    settings,
) -> None:
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    busy, away = staff_client("ann", superuser=True), staff_client("bob", superuser=True)
    assert busy.get("/admin/").status_code == away.get("/admin/").status_code == 200
    rotated(settings, keep_old=True)
    # Used while the old key is a fallback, a session is keyed anew (Django's own upgrade)...
    assert busy.get("/admin/").status_code == 200
    rotated(settings, keep_old=False)
    assert busy.get("/admin/").status_code == 200
    # ... and one left unused until the old key went is signed out.
    assert away.get("/admin/").status_code == 302
