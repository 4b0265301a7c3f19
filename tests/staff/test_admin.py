import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from events.models import AccessCode, Event, Tier
from queueing.beat import event_tick
from queueing.models import AuditRecord, QueueEntry
from staff.services import TierSpec, event_close, event_pause
from tests.helpers import fans_join, join, new_fan, staff_client, waiting_entries
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_() -> Client:
    return staff_client("boss", superuser=True)


def test_creating_an_event_in_the_admin_goes_through_the_service(admin_client_) -> None:
    response = admin_client_.post(
        "/admin/events/event/add/",
        {
            "slug": "gig",
            "name": "Gig",
            "target_url": "https://shop.example/",
            "capacity": 10,
            "rate_per_minute": 60,
            "session_seconds": 900,
            "heartbeat_seconds": 60,
            "away_seconds": 600,
            "lanes": 1,
            "queue_order": "fifo",
            "max_queue_length": 0,
            "max_wait_seconds": 0,
            "pow_difficulty": 0,
            "max_live_per_address": 3,
            "shuffle_at_start": "on",
            "mode": "queue",
            "reentry_seconds": 0,
        },
    )
    assert response.status_code == 302, response.content[:2000]
    event = Event.objects.get(slug="gig")
    assert event.tiers.get().is_default
    assert event.max_live_per_address == 3
    record = AuditRecord.objects.get(event=event, action="event_created")
    assert record.actor == "staff:boss"


def test_admin_pages_render_with_tiers_and_codes_inline(admin_client_, event) -> None:
    page = admin_client_.get(f"/admin/events/event/{event.pk}/change/")
    assert page.status_code == 200
    assert b"Tiers" in page.content and b"Access codes" in page.content
    assert admin_client_.get("/admin/queueing/queueentry/").status_code == 200
    assert admin_client_.get("/admin/queueing/auditrecord/").status_code == 200


def test_admin_actions_pause_and_close_through_services(admin_client_, event) -> None:
    join(new_fan(), event.slug)
    for action in ("pause_events", "close_events"):
        admin_client_.post(
            "/admin/events/event/",
            {"action": action, "_selected_action": [event.pk], "post": "yes"},
        )
    actions = list(
        AuditRecord.objects.filter(event=event).order_by("seq").values_list("action", flat=True)
    )
    assert actions[-2:] == ["event_paused", "event_closed"]


def test_the_admin_close_asks_first_and_says_how_many_go_home(admin_client_, make_event) -> None:
    """Closing is final and empties the line: the action shows a confirmation page, as
    Django's delete does, with the fans each on-sale sends home, and closes nothing yet."""
    busy = make_event(slug="busy", capacity=1, rate_per_minute=60)
    quiet = make_event(slug="quiet")
    gone = make_event(slug="gone")
    event_close(event=gone, actor="test", now=timezone.now())
    fans_join(busy.slug, 3)
    event_tick(event_id=busy.id, now=timezone.now())  # one goes in: the capacity
    waiting_entries(busy, busy.tiers.get(), 1232)  # a long line, written straight
    selected = {"action": "close_events", "_selected_action": [busy.pk, quiet.pk, gone.pk]}
    asked = admin_client_.post("/admin/events/event/", selected)
    assert asked.status_code == 200
    html = asked.content.decode()
    summary = re.search(r'<p id="close-summary">(.*?)</p>', html, re.S).group(1)
    assert "sends home the <strong>1,234</strong> fans still in line of these 2 on-sales" in summary
    assert "The 1 fan in the shop keeps their pass until" in summary
    assert "On-sale busy (<code>busy</code>): 1,234 in line sent home, 1 in the shop" in html
    assert "On-sale gone (<code>gone</code>): closed already, nothing changes" in html
    assert 'name="post" value="yes"' in html and "Yes, close" in html
    assert Event.objects.filter(control="closed").count() == 1  # only the one closed before
    done = admin_client_.post("/admin/events/event/", {**selected, "post": "yes"}, follow=True)
    assert "Closed 3 on-sale(s)." in done.content.decode()
    assert set(Event.objects.filter(control="closed").values_list("slug", flat=True)) == {
        "busy",
        "quiet",
        "gone",
    }
    for _ in range(2):  # a thousand a tick
        event_tick(event_id=busy.id, now=timezone.now())
    assert QueueEntry.objects.filter(event=busy, status="revoked").count() == 1234


def test_the_admin_says_on_sale_not_event(admin_client_, make_event) -> None:
    for slug in ("one", "two"):  # a filter by on-sale shows from two on
        join(new_fan(), make_event(slug=slug).slug)
    listing = admin_client_.get("/admin/events/event/").content.decode()
    assert "Select on-sale to change" in listing and "Add on-sale" in listing
    assert ">Event<" not in listing and "Select event" not in listing
    entries = admin_client_.get("/admin/queueing/queueentry/").content.decode()
    assert "By on-sale" in entries and "By event" not in entries
    assert ">On-sale</a>" in entries and ">Event</a>" not in entries


def test_the_audit_trail_is_read_only_in_the_admin(admin_client_, event) -> None:
    record = AuditRecord.objects.get(event=event, action="event_created")
    assert admin_client_.get("/admin/queueing/auditrecord/add/").status_code == 403
    assert admin_client_.post(f"/admin/queueing/auditrecord/{record.pk}/delete/").status_code == 403


def run_action(client: Client, event: Event, action: str, **extra: str):
    return client.post(
        "/admin/events/event/", {"action": action, "_selected_action": [event.pk], **extra}
    )


def started_with_one_admitted(make_event) -> Event:
    """Two fans in line; the first tick lets one in, and the rate lets no other in for now."""
    event = make_event(rate_per_minute=1, capacity=10)
    fans_join(event.slug, 2)
    event_tick(event_id=event.id, now=timezone.now())
    assert admitted_count() == 1
    return event


def admitted_count() -> int:
    return QueueEntry.objects.filter(status="admitted").count()


ACTIONS = [
    ("pause_events", {}),
    ("resume_events", {}),
    ("close_events", {}),
    ("admit_now", {"count": "5"}),
    ("rotate_keys", {}),
]


def test_view_only_staff_can_neither_see_nor_run_the_actions(make_event) -> None:
    event = started_with_one_admitted(make_event)
    records = AuditRecord.objects.count()
    viewer = staff_client("viewer", "view_event")
    for action, extra in ACTIONS:
        run_action(viewer, event, action, **extra)
        after = Event.objects.get(pk=event.pk)
        assert (after.control, after.integration_key) == ("running", event.integration_key)
        assert AuditRecord.objects.count() == records, action
        assert admitted_count() == 1
    page = viewer.get("/admin/events/event/")
    assert page.status_code == 200
    for action, _ in ACTIONS:
        assert action.encode() not in page.content


def test_change_permitted_staff_run_the_actions(make_event) -> None:
    event = started_with_one_admitted(make_event)
    changer = staff_client("carl", "view_event", "change_event")
    run_action(changer, event, "admit_now", count="1")
    assert admitted_count() == 2
    run_action(changer, event, "pause_events")
    assert Event.objects.get(pk=event.pk).control == "paused"
    last = AuditRecord.objects.filter(event=event).order_by("-seq").first()
    assert (last.action, last.actor) == ("event_paused", "staff:carl")
    # The key is a right of its own: changing the on-sale is not enough to rotate or see it.
    run_action(changer, event, "rotate_keys")
    assert Event.objects.get(pk=event.pk).integration_key == event.integration_key
    page = changer.get(f"/admin/events/event/{event.pk}/change/")
    assert page.status_code == 200
    assert event.integration_key.encode() not in page.content


def test_the_key_permission_shows_and_rotates_the_key_in_the_admin(event) -> None:
    keeper = staff_client("kim", "view_event", "change_event", "manage_integration_key")
    page = keeper.get(f"/admin/events/event/{event.pk}/change/")
    assert event.integration_key.encode() in page.content
    run_action(keeper, event, "rotate_keys")
    assert Event.objects.get(pk=event.pk).integration_key != event.integration_key
    last = AuditRecord.objects.filter(event=event).order_by("-seq").first()
    assert (last.action, last.data) == (
        "event_changed",
        {"changes": {"integration_key": "rotated"}},
    )


@pytest.mark.parametrize(
    ("action", "extra", "done"),
    [
        ("pause_events", {}, "event_paused"),
        ("resume_events", {}, "event_resumed"),
        ("close_events", {"post": "yes"}, "event_closed"),  # confirmed
        ("admit_now", {"count": "2"}, "admitted"),
    ],
)
def test_admin_actions_need_their_csrf_token(make_event, action, extra, done) -> None:
    event = make_event(capacity=5, rate_per_minute=1)
    fans_join(event.slug, 3)
    event_tick(event_id=event.id, now=timezone.now())  # the line starts; the rate lets one in
    if action == "resume_events":
        event_pause(event=event, actor="test", now=timezone.now())
    admin = staff_client("root", superuser=True, csrf_checks=True)
    post = {"action": action, "_selected_action": [event.pk], "index": "0", **extra}
    records = AuditRecord.objects.filter(event=event).count()
    assert admin.post("/admin/events/event/", post).status_code == 403
    assert AuditRecord.objects.filter(event=event).count() == records
    # The changelist's own form carries the token, and then the same action goes through.
    token = admin.get("/admin/events/event/").context["csrf_token"]
    response = admin.post("/admin/events/event/", {**post, "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    newest = AuditRecord.objects.filter(event=event).order_by("-seq").first()
    assert newest.action == done


def test_admin_saves_need_their_csrf_token(event) -> None:
    admin = staff_client("root", superuser=True, csrf_checks=True)
    response = admin.post(f"/admin/events/event/{event.pk}/change/", {"capacity": 999})
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.capacity != 999


@pytest.mark.parametrize(
    ("times", "said"),
    [
        (
            {"prequeue_opens_at": 2, "starts_at": 1},
            "The pre-queue must open before the sale starts (or at the same time)",
        ),
        ({"starts_at": 2, "ends_at": 1}, "The on-sale must end after it starts"),
    ],
)
def test_a_schedule_the_database_refuses_is_said_in_words(
    admin_client_, event, times, said
) -> None:
    url = f"/admin/events/event/{event.pk}/change/"
    form = change_form_data(admin_client_, url)
    for field, hours in times.items():
        at = timezone.localtime() + timedelta(hours=hours)
        form[f"{field}_0"] = [at.strftime("%Y-%m-%d")]
        form[f"{field}_1"] = [at.strftime("%H:%M:%S")]
    page = admin_client_.post(url, form)
    assert page.status_code == 200  # the form again, with the error
    html = page.content.decode()
    assert said in html and "Constraint" not in html and "is violated" not in html


def test_two_default_tiers_are_refused_in_words(admin_client_, make_event) -> None:
    event = make_event(
        tiers=[TierSpec("General"), TierSpec("Members", priority=1, access_codes=["VIP"])]
    )
    url = f"/admin/events/event/{event.pk}/change/"
    form = change_form_data(admin_client_, url)
    for index in range(2):
        form[f"tiers-{index}-is_default"] = ["on"]
    html = admin_client_.post(url, form).content.decode()
    assert "Only one tier can take the fans without an access code" in html
    assert "Constraint" not in html
    assert list(event.tiers.filter(is_default=True).values_list("name", flat=True)) == ["General"]
    # Moving the default to the tier listed (served) first: the form taking it is saved
    # before the one letting it go, which the database's index would refuse as it comes.
    form = change_form_data(admin_client_, url)
    assert form["tiers-0-name"] == ["Members"]
    form["tiers-0-is_default"], form["tiers-1-is_default"] = ["on"], []
    assert admin_client_.post(url, form).status_code == 302
    assert list(event.tiers.filter(is_default=True).values_list("name", flat=True)) == ["Members"]


def test_every_constraint_staff_can_trip_says_what_to_do() -> None:
    for model in (Event, Tier, AccessCode):
        for constraint in model._meta.constraints:
            message = constraint.get_violation_error_message()
            assert "Constraint" not in message and "violated" not in message, constraint.name
