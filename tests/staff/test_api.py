import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from events.models import Event, EventControl
from queueing.beat import event_tick
from queueing.models import AuditRecord
from queueing.records.audit_verify import audit_chain_verify
from tests.helpers import (
    EDITOR,
    STAFF_API,
    fans_join,
    join,
    new_fan,
    poll,
    shop_completes,
    staff_api_create,
    staff_client,
    statuses,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> APIClient:
    return staff_client("ann", *EDITOR, api=True, token=True)


def test_staff_create_an_event_with_a_default_tier(staff) -> None:
    response = staff_api_create(staff, capacity=50, rate_per_minute=120)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["slug"] == "tour"
    assert (body["capacity"], body["rate_per_minute"]) == (50, 120)
    assert body["state"] == "open"
    assert len(body["integration_key"]) >= 32
    assert body["tiers"] == [
        {"name": "General", "priority": 100, "share": 0, "is_default": True, "access_codes": []}
    ]
    record = AuditRecord.objects.get(action="event_created")
    assert record.actor == "staff:ann"
    assert record.data["capacity"] == 50


def test_staff_create_tiers_with_access_codes_that_fans_can_use(staff) -> None:
    tiers = [
        {"name": "Fan club", "priority": 10, "access_codes": ["fan-club-123"]},
        {"name": "General", "priority": 100},
    ]
    body = staff_api_create(staff, tiers=tiers).json()
    assert [(t["name"], t["is_default"], t["access_codes"]) for t in body["tiers"]] == [
        ("Fan club", False, ["FAN-CLUB-123"]),
        ("General", True, []),
    ]
    assert join(new_fan(), "tour", {"access_code": "FAN-CLUB-123"}).json()["position"] == 1


def test_staff_read_list_and_patch(staff) -> None:
    staff_api_create(staff)
    assert [e["slug"] for e in staff.get(STAFF_API).json()["results"]] == ["tour"]
    assert staff.get(f"{STAFF_API}tour/").json()["name"] == "The Tour"
    response = staff.patch(
        f"{STAFF_API}tour/", {"capacity": 9, "rate_per_minute": 0}, format="json"
    )
    assert response.status_code == 200
    assert (response.json()["capacity"], response.json()["rate_per_minute"]) == (9, 0)
    change = AuditRecord.objects.get(action="event_changed")
    assert change.data["changes"]["capacity"] == [100, 9]


def test_patching_tiers_keeps_tiers_that_have_fans(staff) -> None:
    staff_api_create(staff)
    join(new_fan(), "tour")
    tiers = [
        {"name": "General", "priority": 50},
        {"name": "VIP", "priority": 1, "access_codes": ["V"]},
    ]
    response = staff.patch(f"{STAFF_API}tour/", {"tiers": tiers}, format="json")
    assert response.status_code == 200
    assert [t["name"] for t in response.json()["tiers"]] == ["VIP", "General"]
    # Removing the tier that has a fan in line is refused.
    response = staff.patch(f"{STAFF_API}tour/", {"tiers": [tiers[1]]}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_pause_resume_close(staff) -> None:
    staff_api_create(staff)
    assert staff.post(f"{STAFF_API}tour/pause").json()["state"] == "paused"
    # Paused still accepts joins.
    assert join(new_fan(), "tour").status_code == 201
    assert staff.post(f"{STAFF_API}tour/resume").json()["state"] == "open"
    assert staff.post(f"{STAFF_API}tour/close").json()["state"] == "closed"
    assert join(new_fan(), "tour").json()["error"] == "event_closed"
    # Closing is final: resume does nothing.
    assert staff.post(f"{STAFF_API}tour/resume").json()["state"] == "closed"
    actions = list(AuditRecord.objects.order_by("seq").values_list("action", flat=True))
    assert actions == [
        "event_created",
        "shuffled",  # nothing scheduled: the line starts with the on-sale
        "event_paused",
        "joined",
        "event_resumed",
        "event_closed",
    ]
    assert audit_chain_verify(event_id=Event.objects.get().id).ok
    assert Event.objects.get().control == EventControl.CLOSED


@pytest.mark.parametrize(
    "fields",
    [
        {"slug": "Not A Slug!"},
        {"capacity": -1},
        {"capacity": "many"},
        {"heartbeat_seconds": 1},
        {"away_seconds": -1},
        {"away_seconds": 86_401},
        {"target_url": "not a url"},
        {"tiers": []},
        {"tiers": [{"name": "A"}, {"name": "A"}]},
        {"tiers": [{"name": "A", "access_codes": ["bad code!"]}]},
        {"starts_at": "2030-01-02T00:00:00Z", "ends_at": "2030-01-01T00:00:00Z"},
        {"prequeue_opens_at": "2030-01-02T00:00:00Z", "starts_at": "2030-01-01T00:00:00Z"},
    ],
)
def test_bad_input_is_a_validation_error(staff, fields) -> None:
    response = staff_api_create(staff, **fields)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["error"] == "validation_error"
    assert body["fields"]
    assert Event.objects.count() == 0


@pytest.mark.parametrize("away_seconds", [0, 600, 86_400])
def test_the_hold_of_an_away_fan_is_set_and_shown(staff, away_seconds: int) -> None:
    response = staff_api_create(staff, away_seconds=away_seconds)
    assert response.status_code == 201, response.json()
    assert response.json()["away_seconds"] == away_seconds
    assert Event.objects.get().away_seconds == away_seconds


def test_a_duplicate_slug_is_a_validation_error(staff) -> None:
    staff_api_create(staff)
    response = staff_api_create(staff)
    assert response.status_code == 400
    assert "slug" in response.json()["fields"]


def test_malformed_json_is_a_bad_request(staff) -> None:
    response = staff.post(STAFF_API, b"{nope", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"


def test_a_method_not_served_is_405_with_allow(staff) -> None:
    response = staff.delete(STAFF_API)
    assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")
    assert response["Allow"] == "GET, POST, HEAD, OPTIONS"


def test_unknown_event_is_404(staff) -> None:
    assert staff.get(f"{STAFF_API}nope/").json()["error"] == "event_not_found"
    assert staff.post(f"{STAFF_API}nope/pause").status_code == 404


def test_anonymous_callers_get_401_and_fans_get_403(db) -> None:
    response = APIClient().get(STAFF_API)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    fan = staff_client("fan", staff=False, api=True)
    response = fan.post(STAFF_API, {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"


@pytest.mark.parametrize(
    "body",
    [
        {"tiers": [{"priority": 5}]},
        {"tiers": [{}]},
        {"tiers": None},
        {"capacity": None},
        {"tiers": [{"name": "General", "access_codes": None}]},
    ],
)
def test_bad_patches_are_validation_errors(staff, body) -> None:
    staff_api_create(staff)
    response = staff.patch(f"{STAFF_API}tour/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "validation_error"


def test_json_nested_too_deep_is_a_bad_request_for_staff_too(staff) -> None:
    response = staff.post(STAFF_API, b"[" * 5000, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"mode": "queue\\ud800"}',  # a choice's error would quote it back
        b'{"name": "Tour \\udfff"}',
        b'{"tiers": [{"name": "General", "access_codes": ["A\\ud800"]}]}',
        b'{"\\ud800": 1}',
    ],
)
def test_a_lone_surrogate_anywhere_in_a_staff_body_is_a_bad_request(staff, raw: bytes) -> None:
    staff_api_create(staff)
    response = staff.patch(f"{STAFF_API}tour/", raw, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "bad_request"
    assert Event.objects.get(slug="tour").name != "Tour \udfff"


# Permissions: staff status lets a user in, the model permissions decide what they may do.

WRITES = [
    ("post", STAFF_API, {"slug": "other", "name": "Other", "target_url": "https://evil.example/"}),
    ("patch", f"{STAFF_API}tour/", {"target_url": "https://evil.example/", "name": "Gone"}),
    ("post", f"{STAFF_API}tour/pause", None),
    ("post", f"{STAFF_API}tour/resume", None),
    ("post", f"{STAFF_API}tour/close", None),
    ("post", f"{STAFF_API}tour/rotate-key", None),
]


def forbidden(response) -> bool:
    return response.status_code == 403 and response.json()["error"] == "forbidden"


def test_staff_without_permissions_may_not_read_write_or_see_the_key(staff) -> None:
    key = staff_api_create(staff).json()["integration_key"]
    event = Event.objects.get()
    nobody = staff_client("nobody", api=True, token=True)
    for method, path, body in WRITES:
        response = getattr(nobody, method)(path, body, format="json")
        assert forbidden(response), (method, path, response.content)
        assert key.encode() not in response.content
    for path in (STAFF_API, f"{STAFF_API}tour/"):
        assert forbidden(nobody.get(path))
    assert Event.objects.count() == 1
    after = Event.objects.get()
    assert (after.name, after.target_url, after.control, after.integration_key) == (
        event.name,
        event.target_url,
        event.control,
        event.integration_key,
    )
    assert list(AuditRecord.objects.order_by("seq").values_list("action", flat=True)) == [
        "event_created",
        "shuffled",
    ]


def test_a_missing_permission_is_named(staff) -> None:
    staff_api_create(staff)
    response = staff_client("viewer", "view_event", api=True, token=True).patch(
        f"{STAFF_API}tour/", {"capacity": 1}
    )
    assert response.json()["detail"] == "You lack the permission 'events.change_event'."


def test_view_only_staff_see_on_sales_without_the_key_and_change_nothing(staff) -> None:
    staff_api_create(staff)
    viewer = staff_client("viewer", "view_event", api=True, token=True)
    listed = viewer.get(STAFF_API).json()["results"]
    assert [e["slug"] for e in listed] == ["tour"]
    assert listed[0]["integration_key"] is None
    detail = viewer.get(f"{STAFF_API}tour/").json()
    assert (detail["name"], detail["integration_key"]) == ("The Tour", None)
    for method, path, body in WRITES:
        assert forbidden(getattr(viewer, method)(path, body, format="json")), (method, path)
    assert Event.objects.get().target_url == "https://shop.example/"
    assert Event.objects.get().control == EventControl.RUNNING


def test_changing_needs_change_and_the_audit_keeps_old_and_new_target(staff) -> None:
    staff_api_create(staff)
    changer = staff_client("carl", "change_event", api=True, token=True)
    response = changer.patch(
        f"{STAFF_API}tour/",
        {"target_url": "https://shop2.example/buy", "name": "Tour"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["target_url"] == "https://shop2.example/buy"
    assert response.json()["integration_key"] is None
    record = AuditRecord.objects.get(action="event_changed")
    assert record.actor == "staff:carl"
    assert record.data["changes"]["target_url"] == [
        "https://shop.example/",
        "https://shop2.example/buy",
    ]
    assert record.data["changes"]["name"] == ["The Tour", "Tour"]
    assert changer.post(f"{STAFF_API}tour/pause").json()["control"] == "paused"
    # Changing includes seeing, as in Django's admin; creating is a right of its own.
    assert changer.get(f"{STAFF_API}tour/").status_code == 200
    assert forbidden(staff_api_create(changer, slug="other"))
    assert forbidden(changer.post(f"{STAFF_API}tour/rotate-key"))


def test_creating_needs_add(db) -> None:
    creator = staff_client("cleo", "add_event", api=True, token=True)
    response = staff_api_create(creator)
    assert response.status_code == 201, response.content
    assert response.json()["integration_key"] is None
    assert forbidden(creator.patch(f"{STAFF_API}tour/", {"capacity": 1}, format="json"))


def test_the_key_permission_shows_and_rotates_the_key(staff, make_event) -> None:
    event = make_event(slug="tour", capacity=2, rate_per_minute=0)
    tickets = fans_join(event.slug, 1)
    event_tick(event_id=event.id, now=timezone.now())
    token = poll(tickets[0])["pass"]
    keeper = staff_client("kim", "view_event", "manage_integration_key", api=True, token=True)
    old_key = keeper.get(f"{STAFF_API}tour/").json()["integration_key"]
    assert old_key == event.integration_key

    response = keeper.post(f"{STAFF_API}tour/rotate-key")
    assert response.status_code == 200, response.content
    new_key = response.json()["integration_key"]
    assert len(new_key) >= 32 and new_key != old_key
    assert shop_completes(token, old_key).status_code == 401
    assert statuses(tickets) == ["admitted"]
    assert shop_completes(token, new_key).status_code == 204
    assert statuses(tickets) == ["completed"]

    record = AuditRecord.objects.filter(action="event_changed").get()
    assert (record.actor, record.data) == ("staff:kim", {"changes": {"integration_key": "rotated"}})
    assert old_key not in str(record.data) and new_key not in str(record.data)
    assert audit_chain_verify(event_id=event.id).ok
    # Without the right to view the on-sale, the key permission alone opens nothing.
    assert forbidden(
        staff_client("kay", "manage_integration_key", api=True, token=True).post(
            f"{STAFF_API}tour/rotate-key"
        )
    )


def test_superusers_hold_every_permission(db) -> None:
    client = staff_client("boss", superuser=True, api=True)
    assert staff_api_create(client).json()["integration_key"]
    assert client.post(f"{STAFF_API}tour/rotate-key").json()["integration_key"]
    assert client.patch(f"{STAFF_API}tour/", {"capacity": 3}, format="json").json()["capacity"] == 3
