"""Every staff page has a way out: the dashboard's pages a "Sign out" button in their header,
the admin's pages Django's own "Log out"; both POST with the CSRF token (a link or an image
elsewhere cannot sign anyone out), and both really end the session.

Against pytest-django's live server, in Debian's Chromium."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.browser import chromium
from tests.helpers import PASSWORD, staff_client, staff_user

pytestmark = pytest.mark.django_db(transaction=True)

DASHBOARD_PAGES = [
    "/dashboard/",
    "/dashboard/audit/",
    "/dashboard/events/arena/",
    "/dashboard/events/arena/preview",
    "/dashboard/events/arena/report",
]
ADMIN_PAGES = ["/admin/", "/admin/events/event/", "/admin/staff/stafftoken/"]


def sign_in(page, base: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}/dashboard/sign-in/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/dashboard/")


def test_every_dashboard_page_signs_out(live_server, make_event) -> None:  # type: ignore[no-untyped-def]
    make_event(slug="arena")
    staff_user("root", superuser=True)
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page()
        sign_in(page, base)
        for path in DASHBOARD_PAGES:
            answer = page.goto(f"{base}{path}")
            assert answer is not None and answer.status == 200, path
            assert page.is_visible("header #sign-out"), path
        page.click("#sign-out")
        page.wait_for_url(f"{base}/dashboard/sign-in/")
        for path in DASHBOARD_PAGES:
            page.goto(f"{base}{path}")
            assert "sign-in" in page.url or "/admin/login/" in page.url, (path, page.url)


def test_every_admin_page_signs_out(live_server) -> None:  # type: ignore[no-untyped-def]
    staff_user("root", superuser=True)
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page()
        sign_in(page, base)
        for path in ADMIN_PAGES:
            page.goto(f"{base}{path}")
            assert page.is_visible("#logout-form button[type=submit]"), path
        page.click("#logout-form button[type=submit]")
        page.wait_for_url(f"{base}/admin/logout/")
        page.goto(f"{base}/admin/")
        assert "/admin/login/" in page.url


def test_signing_out_takes_a_post_with_the_csrf_token() -> None:
    client = staff_client("root", superuser=True, csrf_checks=True)
    assert client.get("/dashboard/sign-out/").status_code == 405
    assert client.post("/dashboard/sign-out/").status_code == 403  # no CSRF token
    assert client.get("/dashboard/").status_code == 200  # still signed in
    assert Client().post("/dashboard/sign-out/").status_code == 302  # nobody to sign out
