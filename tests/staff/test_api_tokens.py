"""API tokens (staff/api_tokens.py): hashed at rest, expiring, scoped, revocable; the scope
checked on every DRF view of the staff and auditors' APIs by the same rule."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.views import APIView

from staff.api_tokens import (
    scope_required,
    staff_token_check,
    staff_token_create,
    staff_token_revoke,
)
from staff.models import StaffToken, TokenScope
from tests.helpers import AUDITOR, EDITOR, STAFF_API, staff_api_create, staff_user

pytestmark = pytest.mark.django_db


def client_with(plain: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
    return client


def token(user, scope: str = "control", days: int = 90) -> str:
    return staff_token_create(user=user, scope=scope, days=days, now=timezone.now()).plain


def test_the_database_keeps_a_digest_never_the_token() -> None:
    made = staff_token_create(
        user=staff_user("ann", *EDITOR), scope="read", days=30, now=timezone.now()
    )
    row = StaffToken.objects.values().get(pk=made.token.pk)
    assert made.plain.startswith(f"wrt_{row['prefix']}_")
    assert all(made.plain not in str(value) for value in row.values())
    assert row["digest"] != made.plain and len(row["digest"]) == 64
    assert row["expires_at"] - row["created_at"] == timedelta(days=30)


def test_a_token_works_until_it_expires_then_answers_401() -> None:
    user = staff_user("ann", *EDITOR)
    plain = token(user)
    assert client_with(plain).get(STAFF_API).status_code == 200
    now = timezone.now()
    StaffToken.objects.update(created_at=now - timedelta(days=2), expires_at=now)
    response = client_with(plain).get(STAFF_API)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["error"] == "unauthorized"
    assert "expired" in response.json()["detail"]
    assert "staff_token create" in response.json()["detail"]


def test_a_revoked_token_is_refused_and_revoking_twice_does_nothing() -> None:
    plain = token(staff_user("ann", *EDITOR))
    row = StaffToken.objects.get()
    assert staff_token_revoke(token_id=row.pk, now=timezone.now())
    assert not staff_token_revoke(token_id=row.pk, now=timezone.now())
    response = client_with(plain).get(STAFF_API)
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


@pytest.mark.parametrize(
    "plain",
    [
        "wrt_000000000000_" + "x" * 43,  # the right shape, unknown
        "not-a-token",
        "0123456789abcdef0123456789abcdef01234567"[:39] + "g",
    ],
)
def test_unknown_tokens_are_refused(plain: str) -> None:
    staff_user("ann", *EDITOR)
    response = client_with(plain).get(STAFF_API)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized", "detail": "Invalid token."}


def test_a_token_that_differs_after_its_prefix_is_refused() -> None:
    plain = token(staff_user("ann", *EDITOR))
    forged = plain[:-1] + ("A" if plain[-1] != "A" else "B")
    assert client_with(forged).get(STAFF_API).status_code == 401


def test_an_old_drf_token_is_refused_with_how_to_get_a_new_one() -> None:
    response = client_with("0123456789abcdef0123456789abcdef01234567").get(STAFF_API)
    assert response.status_code == 401
    detail = response.json()["detail"]
    assert "old API token" in detail and "manage.py staff_token create" in detail


def test_read_scope_reads_the_staff_api_but_changes_nothing(make_event) -> None:
    event = make_event(slug="tour")
    reader = client_with(token(staff_user("ann", *EDITOR), "read"))
    assert reader.get(f"{STAFF_API}tour/").status_code == 200
    for response in (
        reader.patch(f"{STAFF_API}tour/", {"capacity": 5}, format="json"),
        reader.post(f"{STAFF_API}tour/pause"),
        staff_api_create(reader, slug="another"),
    ):
        assert response.status_code == 403
        assert response.json() == {
            "error": "forbidden",
            "detail": "This token's scope is 'read'; this needs 'control'.",
        }
    event.refresh_from_db()
    assert event.capacity != 5


def test_control_scope_reads_and_changes_but_not_the_audit_api(make_event) -> None:
    make_event(slug="tour")
    controller = client_with(token(staff_user("ann", *EDITOR), "control"))
    assert controller.get(f"{STAFF_API}tour/").status_code == 200
    assert controller.post(f"{STAFF_API}tour/pause").status_code == 200
    refused = controller.get("/api/v1/audit/records/")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "This token's scope is 'control'; this needs 'audit'."


def test_audit_scope_reads_the_audit_api_only(make_event) -> None:
    make_event(slug="tour")
    auditor = client_with(token(staff_user("audrey", **AUDITOR), "audit"))
    assert auditor.get("/api/v1/audit/records/?event=tour").status_code == 200
    assert auditor.get("/api/v1/audit/events/tour/verify").status_code == 200
    assert auditor.get(STAFF_API).status_code == 403
    # The audit API still serves no writes: 405, after the scope let the token through.
    assert auditor.post("/api/v1/audit/records/").status_code == 405
    # A staff account's audit token is no key to the staff API either.
    staff_auditor = client_with(token(staff_user("ann", *EDITOR), "audit"))
    assert staff_auditor.get(STAFF_API).status_code == 403


def test_the_scope_limits_the_account_it_never_widens_it(make_event) -> None:
    make_event(slug="tour")
    viewer = client_with(token(staff_user("vic", "view_event"), "control"))
    response = viewer.post(f"{STAFF_API}tour/pause")
    assert response.status_code == 403
    assert "change_event" in response.json()["detail"]


def test_last_used_is_written_at_most_once_a_minute() -> None:
    plain = token(staff_user("ann", *EDITOR))
    client = client_with(plain)
    client.get(STAFF_API)
    first = StaffToken.objects.get().last_used_at
    assert first is not None
    client.get(STAFF_API)
    assert StaffToken.objects.get().last_used_at == first
    StaffToken.objects.update(last_used_at=first - timedelta(minutes=2))
    staff_token_check(plain=plain, now=timezone.now())
    assert StaffToken.objects.get().last_used_at > first


def test_a_token_lasts_one_to_365_days() -> None:
    user = staff_user("ann")
    for days in (0, 366):
        with pytest.raises(ValueError, match="1 to 365 days"):
            staff_token_create(user=user, scope="read", days=days, now=timezone.now())


def test_an_inactive_account_s_token_is_refused() -> None:
    user = staff_user("ann", *EDITOR)
    plain = token(user)
    user.is_active = False
    user.save()
    assert client_with(plain).get(STAFF_API).status_code == 401


def _api_views(resolver: URLResolver, prefix: str = "") -> list[tuple[str, type[APIView]]]:
    found = []
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            found += _api_views(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            view_class = getattr(pattern.callback, "view_class", None)
            if view_class and issubclass(view_class, APIView):
                found.append((prefix + str(pattern.pattern), view_class))
    return found


def test_every_staff_and_audit_api_view_needs_its_scope() -> None:
    """A new view gets the right scope without saying so: reads read, writes control; every
    view of the auditors' API audit, whatever the method."""
    views = _api_views(get_resolver())
    assert {path for path, _ in views if path.startswith("api/v1/audit/")}
    assert {path for path, _ in views if path.startswith("api/v1/manage/")}
    for path, view_class in views:
        view = view_class()
        if path.startswith("api/v1/audit/"):
            assert {scope_required(view, m) for m in ("GET", "HEAD", "POST")} == {
                TokenScope.AUDIT
            }, path
        elif path.startswith("api/v1/manage/"):
            assert scope_required(view, "GET") == TokenScope.READ, path
            assert scope_required(view, "POST") == TokenScope.CONTROL, path
            assert scope_required(view, "PATCH") == TokenScope.CONTROL, path


def test_the_command_makes_lists_and_revokes_tokens() -> None:
    staff_user("ann", *EDITOR)
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "staff_token", "create", "--user", "ann", "--scope", "read", "--days", "7",
        stdout=out, stderr=err,
    )  # fmt: skip
    plain = out.getvalue().strip()
    assert client_with(plain).get(STAFF_API).status_code == 200
    assert "Shown this once" in err.getvalue()
    row = StaffToken.objects.get()
    assert (row.scope, row.expires_at - row.created_at) == ("read", timedelta(days=7))

    listing = io.StringIO()
    call_command("staff_token", "list", stdout=listing)
    assert row.prefix in listing.getvalue() and "active" in listing.getvalue()
    assert plain not in listing.getvalue()

    call_command("staff_token", "revoke", row.prefix, stdout=io.StringIO())
    assert client_with(plain).get(STAFF_API).status_code == 401
    with pytest.raises(CommandError, match="already revoked"):
        call_command("staff_token", "revoke", row.prefix)
    with pytest.raises(CommandError, match="1 to 365"):
        call_command("staff_token", "create", "--user", "ann", "--scope", "read", "--days", "400")
    with pytest.raises(CommandError, match="No account"):
        call_command("staff_token", "create", "--user", "nobody", "--scope", "read")


def test_the_admin_shows_a_new_token_once_and_revokes() -> None:
    admin = Client()
    admin.force_login(staff_user("root", superuser=True))
    owner = staff_user("ann", *EDITOR)
    response = admin.post(
        "/admin/staff/stafftoken/add/",
        {"user": owner.pk, "scope": "control", "label": "deploy bot", "days": "30"},
        follow=True,
    )
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    plain = next(m.split(": ")[-1] for m in shown if "shown this once" in m)
    assert client_with(plain).get(STAFF_API).status_code == 200
    row = StaffToken.objects.get()
    assert row.label == "deploy bot"
    page = admin.get(f"/admin/staff/stafftoken/{row.pk}/change/")
    assert page.status_code == 200
    assert plain not in page.content.decode() and row.digest not in page.content.decode()
    admin.post(
        "/admin/staff/stafftoken/",
        {"action": "revoke", "_selected_action": [row.pk]},
    )
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert client_with(plain).get(STAFF_API).status_code == 401
