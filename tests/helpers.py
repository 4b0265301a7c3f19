"""What the tests share, in process (the live stack's: tests/http.py): fans joining and polling
through Django's test client, the line's entries read back, one on-sale's tick, staff accounts
and their clients, and the staff API's basics. No test module imports another test module
(tests/test_architecture.py): what two of them need is here."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import jwt
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from dashboard.permissions import AUDITORS_GROUP
from queueing.beat import event_tick
from queueing.line.draw import registration_draw
from queueing.line.invitations import invitation_redeem, invitations_lapse
from queueing.line.place_links import place_link_create
from queueing.line.registration import (
    registration_confirm,
    registration_create,
    registration_window_set,
)
from queueing.models import Invitation, PlaceLink, QueueEntry, RegistrationWindow
from queueing.rules.registrations import confirm_token, invitation_code
from queueing.rules.ticket_codec import TicketRef, ticket_issue, ticket_read
from staff.api_tokens import staff_token_create
from staff.services import event_pause

# Fans and their line.


def new_fan() -> Client:
    """A browser of its own: its own cookie jar, hence its own identity."""
    return Client()


def join(client: Client, slug: str, body: dict[str, Any] | None = None, **headers: str) -> Any:
    return client.post(
        f"/api/v1/events/{slug}/join",
        data=body or {},
        content_type="application/json",
        headers=headers,
    )


def fans_join(slug: str, count: int, body: dict | None = None) -> list[str]:
    return [join(new_fan(), slug, body).json()["ticket"] for _ in range(count)]


def entry_of(ticket: str) -> QueueEntry:
    return QueueEntry.objects.get(pk=ticket_read(ticket).entry_id)


def statuses(tickets: list[str]) -> list[str]:
    return [entry_of(t).status for t in tickets]


def poll(ticket: str) -> dict:
    return Client().get(f"/api/v1/tickets/{ticket}").json()


def shop_completes(pass_token: str, integration_key: str, outcome: str = "completed") -> Any:
    """The shop reports a fan's checkout over (``POST /api/v1/passes/complete``); the answer."""
    return Client().post(
        "/api/v1/passes/complete",
        {"pass": pass_token, "outcome": outcome},
        content_type="application/json",
        headers={"Authorization": f"Bearer {integration_key}"},
    )


def tick(event, now=None):
    """One on-sale's tick (queueing/beat.py: schedule, expiry, admission, broadcast), at
    ``now`` or this moment; its outcome."""
    return event_tick(event_id=event.id, now=now or timezone.now())


def waiting_entries(event, tier, count: int, *, prefix: str = "fan") -> None:
    """``count`` waiting fans of ``tier`` written straight to PostgreSQL (no join path, no
    hot index: callers rebuild it when they need it)."""
    now = timezone.now()
    QueueEntry.objects.bulk_create(
        QueueEntry(
            event=event,
            tier=tier,
            identity=f"{prefix}{i}",
            status="waiting",
            joined_at=now,
            status_changed_at=now,
        )
        for i in range(count)
    )


def tickets_in_line_order(event, tier) -> list[str]:
    return [
        ticket_issue(TicketRef(entry_id=entry_id, event_id=event.id, tier_id=tier.id))
        for entry_id in QueueEntry.objects.filter(event=event)
        .order_by("order_key")
        .values_list("id", flat=True)
    ]


def admission_halted(event, *, settle_seconds: float = 1.5, timeout: float = 15) -> None:
    """Pause the on-sale and wait until nobody more is let in (an admission run that read
    the on-sale before the pause may still finish): positions then hold still, so a test
    can read them all and expect an exact line."""
    event_pause(event=event, actor="test", now=timezone.now())
    deadline = time.monotonic() + timeout
    admitted = QueueEntry.objects.filter(event=event, status="admitted").count()
    while time.monotonic() < deadline:
        time.sleep(settle_seconds)
        now_admitted = QueueEntry.objects.filter(event=event, status="admitted").count()
        if now_admitted == admitted:
            return
        admitted = now_admitted
    raise AssertionError(f"admission went on for {timeout}s after the pause")


def place_link_for(entry: QueueEntry, *, email: bool = False, minutes: float = 5) -> str:
    """A live link (its token) that moves ``entry``'s place: "Continue on your phone", or with
    ``email`` the one the turn mail carries."""
    now = timezone.now()
    return place_link_create(
        entry_id=entry.pk,
        purpose=PlaceLink.Purpose.EMAIL if email else PlaceLink.Purpose.DEVICE,
        now=now,
        expires_at=now + timedelta(minutes=minutes),
    )


# Staff, auditors and other accounts.

PASSWORD = "pw-123456"


def staff_user(
    username: str = "ann",
    *codenames: str,
    staff: bool = True,
    superuser: bool = False,
    groups: tuple[str, ...] = (),
    password: str | None = PASSWORD,
):
    """A new account: staff (or not: ``staff=False``) holding exactly these permissions of the
    events app (``view_event``, ``change_event``, ...), in these groups (``"auditors"``); a
    superuser holds every permission."""
    accounts = get_user_model().objects
    if superuser:
        user = accounts.create_superuser(username, password=password)
    else:
        user = accounts.create_user(username, password=password, is_staff=staff)
    if codenames:
        user.user_permissions.set(
            Permission.objects.filter(content_type__app_label="events", codename__in=codenames)
        )
        assert user.user_permissions.count() == len(codenames)
    for name in groups:
        # A flush by an earlier transactional test takes the migrations' groups away.
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def token_for(user: Any, scope: str = "control", days: int = 90) -> str:
    """A new API token of the account (``Authorization: Token …``), with this scope."""
    return staff_token_create(user=user, scope=scope, days=days, now=timezone.now()).plain


def staff_token(
    username: str = "ann", *codenames: str, scope: str = "control", **account: Any
) -> str:
    """A new account's API token (the staff API's ``Authorization: Token …``), of ``scope``;
    the account as ``staff_user`` makes it."""
    return token_for(staff_user(username, *codenames, **account), scope)


def staff_client(
    username: str = "ann",
    *codenames: str,
    api: bool = False,
    token: bool = False,
    scope: str = "control",
    csrf_checks: bool = False,
    **account: Any,
) -> Any:
    """A client signed in as a new account (``staff_user``'s arguments). Django's test client,
    logged in (checking CSRF tokens when asked), or sending the account's API token
    (``token``, of ``scope``); with ``api``, DRF's ``APIClient``, authenticated as the account
    or by its token."""
    user = staff_user(username, *codenames, **account)
    if token:
        header = f"Token {token_for(user, scope)}"
        if not api:
            return Client(headers={"authorization": header})
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        return client
    if api:
        client = APIClient()
        client.force_authenticate(user)
        return client
    client = Client(enforce_csrf_checks=csrf_checks)
    client.force_login(user)
    return client


# An auditor: not staff, in the auditors' group (``staff_client("audrey", **AUDITOR)``).
AUDITOR: dict[str, Any] = {"staff": False, "groups": (AUDITORS_GROUP,)}


# The staff API (staff/api.py).

STAFF_API = "/api/v1/manage/events/"
# Every permission on on-sales: what the staff API's tests edit with.
EDITOR = ("view_event", "add_event", "change_event", "manage_integration_key")


def staff_api_create(staff: APIClient, **fields: Any) -> Any:
    body = {"slug": "tour", "name": "The Tour", "target_url": "https://shop.example/", **fields}
    return staff.post(STAFF_API, body, format="json")


# A draw's registrations (queueing/line/registration.py).

SHOP_KEY = "k" * 40


def registration_window_open(event: Any, **fields: Any) -> Any:
    """A registration window open now for an hour, with ``SHOP_KEY`` as the shop's key."""
    now = timezone.now()
    values = {
        "opens_at": now - timedelta(minutes=1),
        "closes_at": now + timedelta(hours=1),
        "winners": 10,
        "waitlist": 5,
        "shop_key": SHOP_KEY,
        **fields,
    }
    return registration_window_set(event=event, actor="test", now=now, fields=values)


def shop_token(
    sub: str, *, slug: str, key: str = SHOP_KEY, seconds: int = 600, now: Any = None
) -> str:
    """The identity a shop signs for one of its accounts (HS256, aud = the on-sale's slug)."""
    issued = int((now or timezone.now()).timestamp())
    claims = {"sub": sub, "aud": slug, "iat": issued, "exp": issued + seconds}
    return jwt.encode(claims, key, algorithm="HS256")


def registrations_made(event: Any, *, by_mail: int = 0, by_shop: int = 0, **create: Any) -> list:
    """``by_mail`` registrations by address (each confirmed by its link) and ``by_shop`` by a
    shop's signed identity, through the services; their ``Registered`` answers."""
    now = timezone.now()
    key = event.registration_window.identity_key
    made = []
    for n in range(by_mail):
        registered = registration_create(
            event=event, now=now, email=f"fan{n}@example.com", **create
        )
        token = confirm_token(key, registered.registration.id)
        made.append(registration_confirm(token=token, now=now))
    for n in range(by_shop):
        token = shop_token(f"account-{n}", slug=event.slug, now=now)
        made.append(registration_create(event=event, now=now, shop_token=token, **create))
    return made


def registration_drawn(event: Any, *, by_mail: int = 0, by_shop: int = 0, **window: Any) -> Any:
    """A window opened (``registration_window_open``), registrations made and confirmed
    (``registrations_made``), its close moved just past and the draw done; the window."""
    opened = registration_window_open(event, **window)
    registrations_made(event, by_mail=by_mail, by_shop=by_shop)
    RegistrationWindow.objects.filter(pk=opened.pk).update(
        closes_at=timezone.now() - timedelta(seconds=1)
    )
    registration_draw(event_id=event.id, now=timezone.now())
    opened.refresh_from_db()
    return opened


def invitations_settled(event: Any, *, used: int) -> None:
    """``used`` of the invitations sent join the line with their codes; the others lapse at
    their expiry, each inviting the next waitlisted registration of its tier."""
    window = RegistrationWindow.objects.get(event=event)
    sent = list(Invitation.objects.filter(event=event, status="sent").order_by("created_at"))
    now = timezone.now()
    for invitation in sent[:used]:
        code = invitation_code(window.identity_key, invitation.id)
        invitation_redeem(event=event, code=code, now=now)
    if sent:
        invitations_lapse(now=max(i.expires_at for i in sent) + timedelta(seconds=1))
