"""A line in random order (``Event.queue_order``): each fan's place is the keyed hash of the
on-sale's seed and their ticket (queueing/rules/shuffle.py, ``place_key``), fixed at the join.
Positions, admissions and a rebuilt index follow it; the seed stays secret until the on-sale
ends, and then recomputes the whole order with no inversion."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.fairness import count_inversions
from dashboard.reports import event_fairness, event_report
from queueing.hot import line_index
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.joining import JoinRequest, JoinResult, entry_join_many
from queueing.line.reads import event_layout
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.layout import position_in_line
from queueing.rules.shuffle import place_key
from staff.services import TierSpec, event_close, event_pause, event_update
from tests.helpers import entry_of, fans_join, poll, tick

pytestmark = pytest.mark.django_db


def _join(event, identities, access_code=None):
    now = timezone.now()
    outcomes = entry_join_many(
        [JoinRequest(event=event, identity=i, access_code=access_code, now=now) for i in identities]
    )
    assert all(isinstance(o, JoinResult) for o in outcomes)
    return [o.answer.ticket for o in outcomes]


def _random_event(make_event):
    return make_event(
        queue_order="random",
        capacity=0,
        rate_per_minute=0,
        heartbeat_seconds=3600,
        tiers=[TierSpec("VIP", priority=1, access_codes=["VIP"]), TierSpec("General")],
    )


def _expected_positions(event, seed, tickets):
    """Each ticket's position as the recomputed hash ranks it, tier by tier."""
    layout = event_layout(event.id, fresh=True)
    by_tier = {}
    for ticket in tickets:
        entry = entry_of(ticket)
        by_tier.setdefault(entry.tier_id, []).append((place_key(seed, entry.public_id), ticket))
    counts = [len(by_tier.get(tier.id, [])) for tier in layout.tiers]
    expected = {}
    for tier_id, places in by_tier.items():
        for rank, (_, ticket) in enumerate(sorted(places)):
            expected[ticket] = position_in_line(
                layout, tier_id=tier_id, rank_in_tier=rank, tier_counts=counts
            )
    return expected


def _public(event):
    return Client().get(f"/api/v1/events/{event.slug}").json()


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_random_line_places_and_admits_by_the_seeds_hash(make_event) -> None:
    event = _random_event(make_event)
    seed = event.shuffle_seed
    vip = _join(event, [f"vip-{i}" for i in range(40)], access_code="VIP")
    general = _join(event, [f"fan-{i}" for i in range(260)])
    tickets = vip + general
    for ticket in tickets:
        entry = entry_of(ticket)
        assert entry.order_key == place_key(seed, entry.public_id)
    expected = _expected_positions(event, seed, tickets)
    positions = {ticket: poll(ticket)["position"] for ticket in tickets}
    assert positions == expected
    # Not join order: a hash order puts later joins ahead of earlier ones.
    assert [positions[t] for t in general] != sorted(positions[t] for t in general)

    # Joining again is the same ticket, and so the same place: nobody re-rolls it.
    assert _join(event, ["fan-7", "fan-100"]) == [general[7], general[100]]
    assert poll(general[7])["position"] == expected[general[7]]

    # The hot index rebuilt from PostgreSQL gives the same places.
    layout = event_layout(event.id, fresh=True)
    line_index.line_drop(event.id, tier_ids=[t.id for t in layout.tiers], lanes=layout.lanes)
    assert hot_index_rebuild(event_id=event.id)
    assert {ticket: poll(ticket)["position"] for ticket in tickets} == expected

    # The seed stays secret while the line runs.
    assert _public(event)["queue_order"] == "random"
    assert _public(event)["shuffle_seed"] is None
    assert all(
        r.data.get("seed") is None
        for r in AuditRecord.objects.filter(event=event, action="shuffled")
    )

    admitted = 0
    while admitted < len(tickets):
        outcome = tick(event)
        assert outcome.admitted, "admission stalled"
        admitted += len(outcome.admitted)
    event_close(event=event, actor="test", now=timezone.now())

    # Revealed at the end: the order recomputed from it has no inversion.
    revealed = _public(event)["shuffle_seed"]
    assert revealed == seed
    by_tier = {}
    for record in AuditRecord.objects.filter(event=event, action="admitted").order_by("seq"):
        assert record.data["order_key"] == place_key(revealed, record.ticket_id)
        by_tier.setdefault(record.data["tier"], []).append(place_key(revealed, record.ticket_id))
    assert set(by_tier) == {"VIP", "General"}
    for places in by_tier.values():
        assert places == sorted(places)
    assert event_fairness(event).order_inversions == 0
    report = event_report(event)
    assert report["order_inversions"] == 0
    assert report["place_mismatches"] == 0


def test_a_newcomer_may_land_ahead_of_those_already_waiting_and_the_report_stays_fair(
    make_event, settings
) -> None:
    settings.WR_ADMISSION_BATCH = 10
    event = make_event(queue_order="random", capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    first = _join(event, [f"early-{i}" for i in range(60)])
    while (
        tick(event).admitted
        and QueueEntry.objects.filter(event=event, status="admitted").count() < 20
    ):
        pass
    later = _join(event, [f"late-{i}" for i in range(60)])
    waiting = [t for t in first + later if entry_of(t).status == "waiting"]
    expected = _expected_positions(event, event.shuffle_seed, waiting)
    assert {t: poll(t)["position"] for t in waiting} == expected
    # Some newcomer sorts before a fan who was already waiting.
    still_first = [t for t in first if t in expected]
    assert min(expected[t] for t in later) < max(expected[t] for t in still_first)
    while QueueEntry.objects.filter(event=event, status="waiting").exists():
        assert tick(event).admitted, "admission stalled"
    # By the plain count (admission order against place keys), newcomers sorting ahead of
    # fans let in before they joined are inversions.
    plain = [
        r.data["order_key"]
        for r in AuditRecord.objects.filter(event=event, action="admitted").order_by("seq")
    ]
    assert count_inversions(plain) > 0
    report = event_report(event)
    # Admitted later than some early fans with a higher place: by the plain count, inversions;
    # by the random line's claim (each took the lowest of those committed before), none.
    assert report["order_inversions"] == 0
    assert report["place_mismatches"] == 0


def test_a_fifo_line_still_reveals_its_seed_at_the_start(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=0)
    assert event.queue_order == "fifo"
    _join(event, ["a", "b"])
    assert _public(event)["shuffle_seed"] == event.shuffle_seed
    assert _public(event)["queue_order"] == "fifo"


@pytest.mark.parametrize("shuffle_at_start", [True, False])
def test_the_prequeue_and_late_arrivals_share_one_hash_order(make_event, shuffle_at_start) -> None:
    starts = timezone.now() + timedelta(minutes=5)
    event = make_event(
        queue_order="random",
        shuffle_at_start=shuffle_at_start,
        starts_at=starts,
        capacity=0,
        rate_per_minute=0,
        heartbeat_seconds=3600,
    )
    early = fans_join(event.slug, 30)
    assert {poll(t)["status"] for t in early} == {"prequeue"}
    event_pause(event=event, actor="staff:x", now=timezone.now())
    started = timezone.now()
    event_update(event=event, actor="staff:x", now=started, changes={"starts_at": started})
    tick(event)
    late = fans_join(event.slug, 30)
    shuffled = AuditRecord.objects.get(event=event, action="shuffled")
    assert shuffled.data["seed"] is None and shuffled.data["queue_order"] == "random"
    assert _public(event)["shuffle_seed"] is None
    # The start kept every place: the cohort and those after it, in one hash order.
    for ticket in early + late:
        entry = entry_of(ticket)
        assert entry.order_key == place_key(event.shuffle_seed, entry.public_id)
    expected = _expected_positions(event, event.shuffle_seed, early + late)
    assert {t: poll(t)["position"] for t in early + late} == expected
    assert min(expected[t] for t in late) < max(expected[t] for t in early)
