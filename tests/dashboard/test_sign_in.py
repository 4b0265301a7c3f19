"""The dashboard's sign-in (dashboard/sign_in.py): auditors who are not staff reach the report
after the sale through it, and it counts passwords like the admin's login."""

import pytest
from django.test import Client

from tests.helpers import AUDITOR, staff_user

pytestmark = pytest.mark.django_db

SIGN_IN = "/dashboard/sign-in/"
RIGHT = "a-long-right-password"


def test_an_auditor_who_is_not_staff_signs_in_and_reads_the_report(make_event) -> None:
    event = make_event(slug="told")
    staff_user("audrey", password=RIGHT, **AUDITOR)
    client = Client()
    report = f"/dashboard/events/{event.slug}/report"
    sent = client.get(report)
    assert sent.status_code == 302 and sent["Location"].startswith(f"{SIGN_IN}?next=")
    page = client.get(sent["Location"])
    assert page.status_code == 200 and b'name="password"' in page.content
    signed = client.post(SIGN_IN, {"username": "audrey", "password": RIGHT, "next": report})
    assert signed.status_code == 302 and signed["Location"] == report
    assert client.get(report).status_code == 200
    # Signed in, an auditor still reads only: the staff dashboard stays closed to them.
    assert client.get("/dashboard/").status_code == 302


def test_the_sign_in_locks_out_after_the_accounts_budget(settings) -> None:
    settings.WR_LOGIN_FAILURES_PER_ACCOUNT = 3
    staff_user("ann", password=RIGHT, **AUDITOR)
    client = Client()
    for _ in range(3):
        refused = client.post(SIGN_IN, {"username": "ann", "password": "wrong"})
        assert refused.status_code in (200, 429)
    locked = client.post(SIGN_IN, {"username": "ann", "password": RIGHT})
    assert locked.status_code == 429 and locked["Retry-After"]
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session


def test_the_sign_in_does_not_follow_a_next_to_another_site() -> None:
    staff_user("otto", password=RIGHT, **AUDITOR)
    signed = Client().post(
        SIGN_IN, {"username": "otto", "password": RIGHT, "next": "https://evil.example/"}
    )
    assert signed.status_code == 302 and not signed["Location"].startswith("https://evil")
