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
from queueing.line.leaving import entry_leave
from queueing.line.reads import event_layout
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.layout import position_in_line
from queueing.rules.shuffle import place_key
from queueing.rules.ticket_codec import TicketRef
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


def _paced_random_event(make_event, **fields):
    # A pace (no tick runs: the line stays as joined) so that every waiting fan is quoted.
    return make_event(
        queue_order="random",
        capacity=10_000,
        rate_per_minute=60,
        heartbeat_seconds=3600,
        **fields,
    )


def test_a_newcomer_is_quoted_for_their_place_not_the_back_of_the_line(make_event) -> None:
    event = _paced_random_event(make_event)
    batch = _join(event, [f"fan-{i}" for i in range(200)])
    by_place = sorted(batch, key=lambda t: entry_of(t).order_key)
    quotes = [entry_of(t).quoted_p50 for t in by_place]
    # In one batch too: each quoted where the hash put them, whoever joined first.
    assert quotes == sorted(quotes)
    assert quotes[0] < quotes[-1] / 10
    for number in range(15):
        (ticket,) = _join(event, [f"late-{number}"])
        entry, status = entry_of(ticket), poll(ticket)
        # As the status quotes the same place a moment later (the pace and line unchanged).
        assert entry.quoted_p50 == pytest.approx(status["eta"]["p50"], abs=1.0)
    report = event_report(event)
    assert report["order_inversions"] == 0


def test_a_full_random_line_refuses_by_its_back_whatever_the_newcomers_place(make_event) -> None:
    # 60 a minute: the back of 200 waits ~200 s; a place near the front would wait far less.
    event = _paced_random_event(make_event, max_wait_seconds=120)
    _join(event, [f"fan-{i}" for i in range(120)])
    now = timezone.now()
    outcomes = entry_join_many(
        [
            JoinRequest(event=event, identity=f"late-{i}", access_code=None, now=now)
            for i in range(40)
        ]
    )
    # The line's length decides, not the hash: every newcomer is refused alike.
    assert all(not isinstance(o, JoinResult) for o in outcomes)
    assert {type(o).__name__ for o in outcomes} == {"QueueFull"}


def _leave(ticket) -> None:
    entry = entry_of(ticket)
    ref = TicketRef(
        entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id, lane=entry.lane
    )
    assert entry_leave(ref=ref, now=timezone.now())


@pytest.mark.parametrize("lanes", [1, 4])
def test_leaving_and_joining_again_keeps_the_place_and_a_turn_is_had_once(
    make_event, lanes
) -> None:
    event = make_event(
        queue_order="random", capacity=0, rate_per_minute=0, heartbeat_seconds=3600, lanes=lanes
    )
    tickets = _join(event, [f"fan-{i}" for i in range(40)])
    # Whoever is placed far back leaves and joins again, twice: the same place each time.
    far_back = sorted(tickets, key=lambda t: entry_of(t).order_key)[-5:]
    identities = {t: entry_of(t).identity for t in far_back}
    kept = {}
    for ticket in far_back:
        first = entry_of(ticket)
        _leave(ticket)
        (again,) = _join(event, [identities[ticket]])
        _leave(again)
        (third,) = _join(event, [identities[ticket]])
        assert again != ticket and third != again
        assert entry_of(again).order_key == entry_of(third).order_key == first.order_key
        joined = AuditRecord.objects.get(
            event=event, action="joined", ticket_id=entry_of(third).public_id
        )
        assert joined.data["placed_by"] == str(first.public_id)
        assert joined.data["order_key"] == place_key(event.shuffle_seed, first.public_id)
        kept[ticket] = third
    admitted = 0
    while admitted < len(tickets):
        outcome = tick(event)
        assert outcome.admitted, "admission stalled"
        admitted += len(outcome.admitted)
    assert {entry_of(t).status for t in kept.values()} == {"admitted"}
    # A fan who had their turn (and ended it) is placed afresh: their new ticket's own hash.
    _leave(kept[far_back[0]])
    (after_turn,) = _join(event, [identities[far_back[0]]])
    fresh = entry_of(after_turn)
    assert fresh.order_key == place_key(event.shuffle_seed, fresh.public_id)
    assert (
        "placed_by" not in AuditRecord.objects.get(ticket_id=fresh.public_id, action="joined").data
    )
    event_close(event=event, actor="test", now=timezone.now())
    report = event_report(event)
    assert report["order_inversions"] == 0
    assert report["place_mismatches"] == 0
