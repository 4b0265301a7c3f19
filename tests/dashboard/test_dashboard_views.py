import pytest
from django.test import Client
from django.utils import timezone

from events.models import EventControl
from queueing.models import AuditRecord, QueueEntry
from staff.services import event_pause
from tests.helpers import fans_join, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", "change_event")


def test_staff_without_change_rights_may_look_but_not_steer(make_event) -> None:
    event = make_event()
    onlooker = staff_client("viv", "view_event")
    assert onlooker.get(f"/dashboard/events/{event.slug}/").status_code == 200
    onlooker.post(
        f"/dashboard/events/{event.slug}/control", {"action": "close", "confirmed": "yes"}
    )
    event.refresh_from_db()
    assert event.control == EventControl.RUNNING


def test_the_dashboard_is_for_staff_only(make_event) -> None:
    event = make_event()
    assert Client().get("/dashboard/").status_code == 302  # to the login page
    fan = staff_client("fan", staff=False)
    assert fan.get(f"/dashboard/events/{event.slug}/stats").status_code == 302


def test_staff_who_may_not_see_on_sales_get_no_dashboard(make_event) -> None:
    """Staff without ``view_event`` (nor ``change_event``) see no on-sale here, as in the staff
    API and the admin: every page and figure of the dashboard answers 403."""
    event = make_event()
    nobody = staff_client("nobody")
    pages = (
        "/dashboard/",
        "/dashboard/catalogue/figures",
        f"/dashboard/events/{event.slug}/",
        f"/dashboard/events/{event.slug}/stats",
        f"/dashboard/events/{event.slug}/preview",
    )
    for url in pages:
        assert nobody.get(url).status_code == 403, url
    for url in ("message", "control"):
        answer = nobody.post(f"/dashboard/events/{event.slug}/{url}", {"action": "close"})
        assert answer.status_code == 403, url
    viewer = staff_client("viewer", "view_event")
    for url in pages[:4]:
        assert viewer.get(url).status_code == 200, url


def test_stats_give_the_live_figures_and_charts(staff, make_event) -> None:
    event = make_event(capacity=4)
    fans_join(event.slug, 3)
    figures = staff.get(f"/dashboard/events/{event.slug}/stats").json()
    assert (figures["waiting"], figures["active"], figures["capacity"]) == (3, 0, 4)
    assert figures["arrivals_per_minute"] == 3
    # Capacity-bound and nothing measured yet: no estimate rather than the settings' bound.
    assert figures["wait_p50_s"] is None and figures["wait_text"] == "–"
    assert figures["charts"]["arrivals"].startswith("<svg")
    paced = make_event(slug="paced", capacity=0, rate_per_minute=60)
    fans_join(paced.slug, 3)
    assert staff.get("/dashboard/events/paced/stats").json()["wait_p50_s"] is not None
    page = staff.get(f"/dashboard/events/{event.slug}/")
    assert page.status_code == 200 and b"Arrivals per minute" in page.content


def test_controls_need_confirmation_then_go_through_services(staff, make_event) -> None:
    event = make_event()
    url = f"/dashboard/events/{event.slug}/control"
    first = staff.post(url, {"action": "pause"})
    assert first.status_code == 200 and b"Confirm" in first.content
    event.refresh_from_db()
    assert event.control == EventControl.RUNNING
    staff.post(url, {"action": "pause", "confirmed": "yes"})
    staff.post(url, {"action": "capacity", "value": "7", "confirmed": "yes"})
    event.refresh_from_db()
    assert (event.control, event.capacity) == (EventControl.PAUSED, 7)
    actions = list(AuditRecord.objects.filter(event=event).values_list("action", "actor"))
    assert ("event_paused", "staff:ann") in actions and ("event_changed", "staff:ann") in actions
    bad = staff.post(url, {"action": "rate", "value": "-3", "confirmed": "yes"}, follow=True)
    assert b"whole number" in bad.content


def test_admit_n_now_from_the_admin(make_event) -> None:
    from django.utils import timezone

    from queueing.beat import event_tick

    event = make_event(capacity=5, rate_per_minute=1)
    fans_join(event.slug, 5)
    event_tick(event_id=event.id, now=timezone.now())  # the rate lets one in
    admin = staff_client("root", superuser=True)
    admin.post(
        "/admin/events/event/",
        {"action": "admit_now", "_selected_action": [event.pk], "count": "3"},
    )
    assert QueueEntry.objects.filter(status="admitted").count() == 4
    manual = AuditRecord.objects.filter(action="admitted", actor="staff:root").count()
    assert manual == 3
    admin.post(
        "/admin/events/event/",
        {"action": "admit_now", "_selected_action": [event.pk], "count": "9"},
    )
    assert QueueEntry.objects.filter(status="admitted").count() == 5  # never past capacity


def _csrf_token(client: Client, url: str) -> str:
    """The token a page of ours hands its forms (and sets as the csrftoken cookie)."""
    page = client.get(url)
    assert page.status_code == 200
    return page.context["csrf_token"]


@pytest.mark.parametrize(
    ("control", "start", "post", "changed"),
    [
        ("pause", EventControl.RUNNING, {"action": "pause"}, ("control", EventControl.PAUSED)),
        ("resume", EventControl.PAUSED, {"action": "resume"}, ("control", EventControl.RUNNING)),
        ("close", EventControl.RUNNING, {"action": "close"}, ("control", EventControl.CLOSED)),
        ("capacity", EventControl.RUNNING, {"action": "capacity", "value": "7"}, ("capacity", 7)),
        ("rate", EventControl.RUNNING, {"action": "rate", "value": "9"}, ("rate_per_minute", 9)),
    ],
)
def test_every_control_needs_its_csrf_token(make_event, control, start, post, changed) -> None:
    event = make_event(capacity=3, rate_per_minute=60)
    if start == EventControl.PAUSED:
        event_pause(event=event, actor="test", now=timezone.now())
    url = f"/dashboard/events/{event.slug}/control"
    browser = staff_client("eve", "change_event", csrf_checks=True)
    records = AuditRecord.objects.filter(event=event).count()
    # A cross-site form: neither the confirmation step nor the confirmed control goes through.
    assert browser.post(url, post).status_code == 403
    assert browser.post(url, {**post, "confirmed": "yes"}).status_code == 403
    event.refresh_from_db()
    assert (event.control, event.capacity, event.rate_per_minute) == (start, 3, 60)
    assert AuditRecord.objects.filter(event=event).count() == records
    # The dashboard's own form, with the token, does it: the 403s were the missing token's.
    token = _csrf_token(browser, f"/dashboard/events/{event.slug}/")
    done = browser.post(url, {**post, "confirmed": "yes", "csrfmiddlewaretoken": token})
    assert done.status_code == 302
    event.refresh_from_db()
    field, value = changed
    assert getattr(event, field) == value
