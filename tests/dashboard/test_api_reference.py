"""The staff's API reference (dashboard/api_reference.py): signed-in staff only, served from the
room itself under the pages' Content-Security-Policy."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.test import Client

from tests.helpers import AUDITOR, staff_client

pytestmark = pytest.mark.django_db

REFERENCE = "/api/v1/docs/"


def test_anyone_not_signed_in_is_sent_to_the_sign_in_page() -> None:
    response = Client().get(REFERENCE)
    assert response.status_code == 302
    assert response["Location"] == f"/dashboard/sign-in/?next={REFERENCE}"
    assert Client().get(f"{REFERENCE}?script=").status_code == 302


def test_accounts_that_are_not_staff_do_not_see_it() -> None:
    auditor = staff_client("audrey", **AUDITOR)
    assert auditor.get(REFERENCE).status_code == 302


def test_staff_get_swagger_ui_from_the_room_with_no_inline_script() -> None:
    staff = staff_client("ann")
    response = staff.get(REFERENCE)
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == settings.WR_CONTENT_SECURITY_POLICY
    assert "no-cache" in response["Cache-Control"]
    html = response.content.decode()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts
    # Every script is a file of this site, none is written into the page.
    assert all(body.strip() == "" for _, body in scripts)
    sources = [re.search(r'src="([^"]+)"', attributes).group(1) for attributes, _ in scripts]
    assert all(source.startswith("/") and not source.startswith("//") for source in sources)
    # The files are the app's own (the ASGI app serves them; tests/dashboard/
    # test_api_reference_browser.py loads them in a browser).
    for source in sources[:-1]:
        assert finders.find(source.removeprefix(settings.STATIC_URL).lstrip("/")), source
    assert sources[-1] == f"{REFERENCE}?script="
    start = staff.get(f"{REFERENCE}?script=")
    assert start["Content-Type"].startswith("application/javascript")
    assert '"/api/schema/"' in start.content.decode()
    assert '"validatorUrl": null' in start.content.decode()


def test_the_schema_stays_open_to_all() -> None:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert REFERENCE not in response.json()["paths"]


def test_the_dashboard_links_it_for_staff(make_event) -> None:
    make_event()
    staff = staff_client("ann", "view_event")
    assert f'href="{REFERENCE}"' in staff.get("/dashboard/").content.decode()
    auditor = staff_client("audrey", **AUDITOR)
    assert REFERENCE not in auditor.get("/dashboard/audit/").content.decode()
