"""Staff and auditors sign in through a real OpenID Connect provider, end to end: npm's
oidc-provider (integrations/oidc_test_provider/) on a loopback port, the room on
pytest-django's live server, Debian's Chromium between them. The provider's groups decide
what each person may do in the room (dashboard/oidc.py); nobody in no mapped group gets in.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from dashboard import oidc
from events.models import Event, EventControl
from tests.browser import chromium
from tests.helpers import PASSWORD, staff_user
from tests.processes import free_port

pytestmark = pytest.mark.django_db(transaction=True)

PROVIDER_DIR = Path(__file__).resolve().parents[2] / "integrations" / "oidc_test_provider"
needs_provider = pytest.mark.skipif(
    shutil.which("node") is None or not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir(),
    reason="node or oidc-provider is missing: scripts/ensure_oidc_provider.sh installs it "
    "(make test runs it)",
)
CLIENT_ID = "waiting-room"
CLIENT_SECRET = secrets.token_urlsafe(24)
GROUP_MAP = {"room-staff": ("staff",), "room-auditors": ("auditor",)}


@pytest.fixture(scope="module")
def provider(live_server) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The provider's issuer URL, the room's callback its client's only redirect URI."""
    port = free_port()
    process = subprocess.Popen(
        ["node", "provider.mjs"],
        cwd=PROVIDER_DIR,
        env={
            **os.environ,
            "PORT": str(port),
            "CLIENT_ID": CLIENT_ID,
            "CLIENT_SECRET": CLIENT_SECRET,
            "REDIRECT_URI": f"{live_server.url}/dashboard/oidc/callback/",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("listening "), first
        yield first.split()[1]
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def single_sign_on(settings, provider: str) -> str:  # type: ignore[no-untyped-def]
    oidc.discovery.cache_clear()
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Example IdP"
    settings.OIDC_ISSUER = provider
    settings.OIDC_GROUP_MAP = GROUP_MAP
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "dashboard.oidc.RoomOIDCBackend",
    ]
    return provider


def sign_in_with_provider(page, base: str, login: str) -> None:  # type: ignore[no-untyped-def]
    """From the dashboard's sign-in page through the provider's own pages (its development
    login, which takes any password, and its consent) back to the room."""
    page.goto(f"{base}/dashboard/sign-in/")
    page.click("text=Sign in with Example IdP")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.click("button:has-text('Continue')")  # consent to the room's scopes
    page.wait_for_load_state()


def account(login: str):  # type: ignore[no-untyped-def]
    return get_user_model().objects.get(username=f"oidc:{login}")


@needs_provider
def test_staff_from_the_provider_land_on_the_dashboard_and_steer(
    single_sign_on: str, live_server, make_event
) -> None:  # type: ignore[no-untyped-def]
    make_event(slug="arena")
    with chromium() as browser:
        page = browser.new_page()
        sign_in_with_provider(page, live_server.url, "alice")
        assert page.url == f"{live_server.url}/dashboard/", page.url
        assert page.is_visible("#sign-out")
        assert "Alice Control" in page.inner_text("header")

        page.goto(f"{live_server.url}/dashboard/events/arena/")
        page.click("#pause")
        page.click("#confirm")
        page.wait_for_selector("text=On-sale arena: paused.")
    assert Event.objects.get(slug="arena").control == EventControl.PAUSED

    alice = account("alice")
    assert (alice.email, alice.is_staff, alice.is_superuser) == ("alice@example.test", True, False)
    assert [g.name for g in alice.groups.all()] == ["staff"]
    assert alice.has_perm("events.change_event") and not alice.has_perm(
        "events.manage_integration_key"
    )
    assert not alice.has_usable_password()


@needs_provider
def test_an_auditor_from_the_provider_reads_the_audit_pages_only(
    single_sign_on: str, live_server, make_event
) -> None:  # type: ignore[no-untyped-def]
    make_event(slug="arena")
    with chromium() as browser:
        page = browser.new_page()
        sign_in_with_provider(page, live_server.url, "bob")
        assert page.url == f"{live_server.url}/dashboard/audit/", page.url
        assert page.is_visible("text=arena")
        # The on-sale's page with its controls is staff's: the admin's login, for staff only.
        page.goto(f"{live_server.url}/dashboard/events/arena/")
        assert "/admin/login/" in page.url and not page.is_visible("#pause")
        answer = page.goto(f"{live_server.url}/api/v1/audit/events/arena/verify")
        assert answer is not None and answer.status == 200
        answer = page.goto(f"{live_server.url}/api/v1/manage/events/")
        assert answer is not None and answer.status == 403
    bob = account("bob")
    assert not bob.is_staff
    assert [g.name for g in bob.groups.all()] == ["auditors"]


@needs_provider
def test_someone_in_no_mapped_group_is_refused_and_loses_what_they_had(
    single_sign_on: str, live_server
) -> None:  # type: ignore[no-untyped-def]
    # Carol was staff once (the provider had her in room-staff); now she is in marketing only.
    carol = get_user_model().objects.create_user("oidc:carol", is_staff=True)
    carol.groups.add(Group.objects.get_or_create(name="staff")[0])
    with chromium() as browser:
        page = browser.new_page()
        sign_in_with_provider(page, live_server.url, "carol")
        assert page.url.startswith(f"{live_server.url}/dashboard/sign-in/"), page.url
        assert "in no group that may use the waiting room" in page.inner_text("#oidc-refused")
        assert not page.is_visible("#sign-out")
        answer = page.goto(f"{live_server.url}/dashboard/audit/")
        assert answer is not None and "/dashboard/sign-in/" in page.url
    carol.refresh_from_db()
    assert not carol.is_staff and not carol.groups.exists()


@needs_provider
def test_both_sign_in_pages_offer_the_provider_and_passwords_still_work(
    single_sign_on: str,
) -> None:
    client = Client()
    for path in ("/dashboard/sign-in/", "/admin/login/"):
        assert "Sign in with Example IdP" in client.get(path).content.decode()
    staff_user("ann", "view_event")
    response = client.post(
        "/dashboard/sign-in/", {"username": "ann", "password": PASSWORD}, follow=False
    )
    assert response.status_code == 302


def test_without_a_client_id_there_is_no_single_sign_on() -> None:
    client = Client()
    assert "Sign in with" not in client.get("/dashboard/sign-in/").content.decode()
    assert "Sign in with" not in client.get("/admin/login/").content.decode()
    assert client.get("/dashboard/oidc/authenticate/").status_code == 404
    assert client.get("/dashboard/oidc/callback/?code=x&state=y").status_code == 404


def test_roles_are_set_exactly_leaving_other_groups_alone(settings) -> None:  # type: ignore[no-untyped-def]
    settings.OIDC_GROUP_MAP = {"ops": ("staff", "integration-keys"), "audit": ("auditor",)}
    user = staff_user("oidc:dana", staff=False, groups=("night shift",))
    roles = oidc.roles_of({"groups": ["ops", "unrelated"]})
    assert roles == {"staff", "integration-keys"}
    oidc.account_roles_set(user=user, roles=roles)
    user = get_user_model().objects.get(pk=user.pk)
    assert user.is_staff and user.has_perm("events.manage_integration_key")
    assert sorted(g.name for g in user.groups.all()) == [
        "integration key managers",
        "night shift",
        "staff",
    ]
    oidc.account_roles_set(user=user, roles=oidc.roles_of({"groups": "audit"}))
    user = get_user_model().objects.get(pk=user.pk)
    assert not user.is_staff
    assert sorted(g.name for g in user.groups.all()) == ["auditors", "night shift"]


def test_the_roles_named_in_settings_are_the_roles_defined(settings) -> None:  # type: ignore[no-untyped-def]
    assert set(settings.OIDC_ROLES) == set(oidc.ROLES)


def test_passwords_work_while_the_provider_is_unreachable(settings) -> None:  # type: ignore[no-untyped-def]
    oidc.discovery.cache_clear()
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    settings.OIDC_GROUP_MAP = GROUP_MAP
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "dashboard.oidc.RoomOIDCBackend",
    ]
    staff_user("ann", "view_event")
    client = Client()
    response = client.post("/dashboard/sign-in/", {"username": "ann", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/dashboard/").status_code == 200
    # The button needs the provider: the sign-in page says it cannot be reached.
    browser = Client()
    sent_back = browser.get("/dashboard/oidc/authenticate/")
    assert sent_back.status_code == 302 and sent_back["Location"].endswith("?oidc=refused")
    assert "could not be reached" in browser.get(sent_back["Location"]).content.decode()
    # A callback the room did not start (no state of its own in the session) is refused.
    refused = Client().get("/dashboard/oidc/callback/?code=x&state=y")
    assert refused.status_code == 302 and refused["Location"].endswith("?oidc=refused")
