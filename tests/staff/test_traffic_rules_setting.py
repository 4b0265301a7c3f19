"""An on-sale's traffic rules through the staff API and the admin: taken, checked with messages
addressed to the field, kept and shown back in the canonical form, and audited as a count and
a digest (header and cookie values may be bypass secrets)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.test import Client

from events.models import Event
from queueing.models import AuditRecord
from queueing.records.audit_verify import audit_chain_verify
from tests.helpers import EDITOR, STAFF_API, staff_api_create, staff_client
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db

SECRET = "let-me-in-7f3a"
RULES = [
    {"action": "bypass", "header": {"X-Shop-Probe": SECRET}},
    {"action": "block", "ip": ["2001:DB8::/32", "10.0.0.7/32"], "user_agent": ["*BadBot*"]},
    {"path": ["/static/*", "/static/*"], "action": "bypass"},
]
CANONICAL = [
    {"action": "bypass", "header": {"x-shop-probe": SECRET}},
    {"action": "block", "ip": ["2001:db8::/32", "10.0.0.7"], "user_agent": ["*BadBot*"]},
    {"action": "bypass", "path": ["/static/*"]},
]


@pytest.fixture
def staff() -> Any:
    return staff_client("ann", *EDITOR, api=True, token=True)


def digest(rules: list[dict[str, Any]]) -> dict[str, Any]:
    text = json.dumps(rules, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"rules": len(rules), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_a_new_on_sale_has_no_rules(staff) -> None:
    assert staff_api_create(staff).json()["traffic_rules"] == []


def test_rules_are_kept_and_shown_canonical_and_audited_without_their_values(staff) -> None:
    created = staff_api_create(staff, traffic_rules=RULES)
    assert created.status_code == 201, created.json()
    assert created.json()["traffic_rules"] == CANONICAL
    assert Event.objects.get(slug="tour").traffic_rules == CANONICAL
    record = AuditRecord.objects.get(action="event_created")
    assert record.data["traffic_rules"] == digest(CANONICAL)

    changed = staff.patch(
        f"{STAFF_API}tour/", {"traffic_rules": CANONICAL[1:]}, format="json"
    ).json()
    assert changed["traffic_rules"] == CANONICAL[1:]
    assert staff.get(f"{STAFF_API}tour/").json()["traffic_rules"] == CANONICAL[1:]
    change = AuditRecord.objects.filter(action="event_changed").latest("seq").data["changes"]
    assert change["traffic_rules"] == [digest(CANONICAL), digest(CANONICAL[1:])]
    # The same rules written another way change nothing, and nothing is recorded.
    before = AuditRecord.objects.count()
    staff.patch(f"{STAFF_API}tour/", {"traffic_rules": RULES[1:]}, format="json")
    assert AuditRecord.objects.count() == before
    # null is no rules.
    assert (
        staff.patch(f"{STAFF_API}tour/", {"traffic_rules": None}, format="json").json()[
            "traffic_rules"
        ]
        == []
    )
    trail = json.dumps(list(AuditRecord.objects.values_list("data", flat=True)))
    assert SECRET not in trail and "BadBot" not in trail
    assert audit_chain_verify(event_id=Event.objects.get(slug="tour").id).ok


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([{"action": "bypass", "ip": ["10.0.0.1/8"]}], 'rule 1: "10.0.0.1/8" has host bits set'),
        (
            [{"action": "bypass", "ip": ["2001:db8::/129"]}],
            'rule 1: "2001:db8::/129" is not an address or network',
        ),
        ([{"action": "bypass"}], "rule 1: a rule needs at least one condition"),
        ([{"action": "bypass", "path": ["/a"]}, {}], "rule 2: needs an action"),
        ([{"action": "allow", "path": ["/a"]}], 'rule 1: unknown action "allow"'),
        ({"action": "bypass"}, "Traffic rules must be a list of rules."),
    ],
)
def test_bad_rules_are_refused_with_messages_under_the_field(staff, rules, message) -> None:
    created = staff_api_create(staff, traffic_rules=rules)
    assert created.status_code == 400, created.json()
    body = created.json()
    assert body["error"] == "validation_error"
    assert any(said.startswith(message) for said in body["fields"]["traffic_rules"]), body
    assert not Event.objects.exists()

    staff_api_create(staff, traffic_rules=CANONICAL)
    patched = staff.patch(f"{STAFF_API}tour/", {"traffic_rules": rules}, format="json")
    assert patched.status_code == 400
    assert any(said.startswith(message) for said in patched.json()["fields"]["traffic_rules"])
    assert Event.objects.get(slug="tour").traffic_rules == CANONICAL


def test_the_admin_edits_the_rules_as_json_with_the_same_messages(make_event) -> None:
    event = make_event()
    admin: Client = staff_client("boss", superuser=True)
    url = f"/admin/events/event/{event.pk}/change/"
    form = change_form_data(admin, url)
    assert form["traffic_rules"] == ["[]"]

    form["traffic_rules"] = [json.dumps([{"action": "bypass", "ip": ["10.0.0.1/8"]}, {}])]
    page = admin.post(url, form)
    assert page.status_code == 200  # the form again, with the errors
    html = page.content.decode()
    assert "rule 1: &quot;10.0.0.1/8&quot; has host bits set" in html
    assert "rule 2: needs an action (bypass, queue or block)." in html
    form["traffic_rules"] = ["[{not json"]
    assert "Enter a valid JSON." in admin.post(url, form).content.decode()
    event.refresh_from_db()
    assert event.traffic_rules == []

    form["traffic_rules"] = [json.dumps(RULES)]
    assert admin.post(url, form).status_code == 302
    event.refresh_from_db()
    assert event.traffic_rules == CANONICAL
    change = AuditRecord.objects.filter(action="event_changed").latest("seq").data["changes"]
    assert change["traffic_rules"] == [digest([]), digest(CANONICAL)]
    # An emptied box is no rules.
    form = change_form_data(admin, url)
    form["traffic_rules"] = [""]
    assert admin.post(url, form).status_code == 302
    event.refresh_from_db()
    assert event.traffic_rules == []
