from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.hot import keys, stats
from queueing.line.admission import admission_run
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.eta import SETTLING_SECONDS, estimate_wait
from queueing.rules.states import EntryStatus
from staff.services import TierSpec, event_pause, event_resume
from tests.helpers import entry_of, fans_join, join, new_fan, poll, statuses, tick

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("lanes", [1, 4])
def test_capacity_3_with_10_fans_admits_exactly_the_first_3(make_event) -> None:
    event = make_event(capacity=3, rate_per_minute=0)
    tickets = fans_join(event.slug, 10)
    outcome = tick(event)
    assert len(outcome.admitted) == 3
    assert statuses(tickets) == ["admitted"] * 3 + ["waiting"] * 7
    assert [poll(t)["position"] for t in tickets[3:]] == list(range(1, 8))
    assert tick(event).admitted == ()
    assert QueueEntry.objects.filter(status="admitted").count() == 3


@pytest.mark.parametrize("lanes", [1, 4])
def test_admission_records_are_audited_in_admission_order(make_event) -> None:
    event = make_event(capacity=5, rate_per_minute=0)
    tickets = fans_join(event.slug, 5)
    tick(event)
    admitted = AuditRecord.objects.filter(event=event, action="admitted").order_by("seq")
    assert [r.ticket_id for r in admitted] == [entry_of(t).public_id for t in tickets]
    assert all(r.actor == "system:admission" for r in admitted)


@pytest.mark.parametrize("lanes", [1, 4])
def test_the_rate_paces_admissions_and_no_minute_holds_more_than_the_rate(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=6, heartbeat_seconds=3600)
    fans_join(event.slug, 20)
    start = timezone.now()
    admitted_at = []
    for second in range(0, 120):
        outcome = tick(event, start + timedelta(seconds=second))
        admitted_at += [second] * len(outcome.admitted)
    assert admitted_at == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110]
    for begin in range(0, 120):
        assert sum(begin <= t < begin + 60 for t in admitted_at) <= 6


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_strict_tier_goes_first_and_positions_show_it(make_event) -> None:
    event = make_event(
        capacity=2,
        rate_per_minute=0,
        tiers=[TierSpec("VIP", priority=1, access_codes=["VIP"]), TierSpec("General")],
    )
    general = fans_join(event.slug, 3)
    vip = fans_join(event.slug, 2, {"access_code": "VIP"})
    assert [poll(t)["position"] for t in vip + general] == [1, 2, 3, 4, 5]
    tick(event)
    assert statuses(vip) == ["admitted", "admitted"]
    assert statuses(general) == ["waiting"] * 3


@pytest.mark.parametrize("lanes", [1, 4])
def test_weighted_tiers_share_batches_so_none_starves(make_event) -> None:
    event = make_event(
        capacity=0,
        rate_per_minute=0,
        tiers=[
            TierSpec("Fans", priority=1, share=3, access_codes=["FAN"]),
            TierSpec("General", priority=2, share=1),
        ],
    )
    fans = fans_join(event.slug, 10, {"access_code": "FAN"})
    general = fans_join(event.slug, 10)
    from django.test import override_settings

    with override_settings(WR_ADMISSION_BATCH=4):
        tick(event)
        assert statuses(fans).count("admitted") == 3
        assert statuses(general).count("admitted") == 1
        tick(event)
    assert statuses(fans)[:6] == ["admitted"] * 6
    assert statuses(general)[:2] == ["admitted"] * 2


def test_pause_stops_admission_but_not_joins(make_event) -> None:
    event = make_event(capacity=10, rate_per_minute=0)
    fans_join(event.slug, 2)
    event_pause(event=event, actor="staff:x", now=timezone.now())
    late = fans_join(event.slug, 1)
    assert tick(event).admitted == ()
    assert QueueEntry.objects.filter(status="admitted").count() == 0
    event_resume(event=event, actor="staff:x", now=timezone.now())
    tick(event)
    assert statuses(late) == ["admitted"]


def test_a_paused_line_quotes_no_wait_until_staff_resume(make_event, settings) -> None:
    """Nobody knows when staff resume: a wait quoted during a pause leaves it out (the pause
    rehearsal: fans who joined during a 10 s pause were told the pace as if nothing held it)."""
    settings.WR_LAYOUT_CACHE_SECONDS = 0  # the layout as it is now, not as this process saw it
    event = make_event(capacity=0, rate_per_minute=60)  # the rate is exact from the start
    (ticket,) = fans_join(event.slug, 1)
    fans_join(event.slug, 3)
    assert poll(ticket)["eta"] is not None
    event_pause(event=event, actor="staff:x", now=timezone.now())
    late = fans_join(event.slug, 1)[0]
    assert [poll(t)["eta"] for t in (ticket, late)] == [None, None]
    assert Client().get(f"/api/v1/events/{event.slug}").json()["eta_new"] is None
    event_resume(event=event, actor="staff:x", now=timezone.now())
    assert poll(late)["eta"]["p50"] > 0
    assert Client().get(f"/api/v1/events/{event.slug}").json()["eta_new"] is not None


def test_after_a_prequeue_is_let_go_the_pace_is_measured_once_the_sale_settled(
    make_event,
) -> None:
    """The pre-queue fills the shop at once and every page reloads: for SETTLING_SECONDS the
    room says "measuring" (no estimate) rather than the pace of those seconds (the surge
    rehearsal: every pre-queue fan was quoted from a first tick that read 10/s, then 3.6/s,
    for a sale that went at 17/s)."""
    start = timezone.now()
    event = make_event(
        capacity=4,
        rate_per_minute=0,
        heartbeat_seconds=3600,
        prequeue_opens_at=start - timedelta(minutes=1),
        starts_at=start + timedelta(seconds=1),
        shuffle_at_start=True,
    )
    fans_join(event.slug, 80)
    admitted_at: dict[int, int] = {}

    def second(s: int) -> None:
        done = [entry_id for entry_id, at in admitted_at.items() if at == s - 2]
        QueueEntry.objects.filter(pk__in=done).update(
            status="completed", ended_at=start + timedelta(seconds=s)
        )
        for moved in tick(event, start + timedelta(seconds=s)).admitted:
            admitted_at[moved.id] = s

    for s in range(1, SETTLING_SECONDS):
        second(s)
    assert min(admitted_at.values()) == 1  # the line started at 1 s
    measuring = stats.read_throughput(event.id)
    assert measuring is None or estimate_wait(10, measuring) is None
    for s in range(SETTLING_SECONDS, SETTLING_SECONDS + 5):
        second(s)
    assert stats.read_throughput(event.id).lam == pytest.approx(2.0, rel=0.25)


def test_a_pause_does_not_read_as_a_shop_that_slowed_down(make_event) -> None:
    """The shop checks fans out while staff hold the line: those departures are counted as
    they happen, not all at the first run after the pause against a shop as full as before
    it (the pause rehearsal: fans quoted right after it were told about three times their
    wait)."""
    event = make_event(capacity=4, rate_per_minute=0, heartbeat_seconds=3600)
    fans_join(event.slug, 60)
    start = timezone.now()
    admitted_at: dict[int, int] = {}

    def second(s: int) -> None:
        # Every checkout takes 2 s: the shop's pace is 4 / 2 s = 2 fans a second.
        done = [entry_id for entry_id, at in admitted_at.items() if at == s - 2]
        QueueEntry.objects.filter(pk__in=done).update(
            status="completed", ended_at=start + timedelta(seconds=s)
        )
        for moved in tick(event, start + timedelta(seconds=s)).admitted:
            admitted_at[moved.id] = s

    for s in range(30):
        second(s)
    event_pause(event=event, actor="staff:x", now=start + timedelta(seconds=30))
    for s in range(30, 40):
        second(s)
    event_resume(event=event, actor="staff:x", now=start + timedelta(seconds=40))
    for s in range(40, 43):
        second(s)
    assert stats.read_throughput(event.id).lam == pytest.approx(2.0, rel=0.25)


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_fan_whose_page_went_away_is_expired_not_admitted(make_event, redis_client) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    gone, present = fans_join(event.slug, 2)
    entry = entry_of(gone)
    redis_client.zadd(keys.heartbeats(event.id, entry.lane), {str(entry.id): 1.0})
    outcome = tick(event)
    assert statuses([gone, present])[0] == "expired"
    # The slot the absent fan would have taken goes to the next fan at once or next tick.
    tick(event)
    assert statuses([gone, present]) == ["expired", "admitted"]
    assert len(outcome.expired) + len(outcome.admitted) >= 1


@pytest.mark.parametrize("lanes", [1, 4])
def test_unseen_waiting_tickets_expire_in_the_pruning(make_event, redis_client) -> None:
    event = make_event(capacity=0, rate_per_minute=0, away_seconds=0)
    event_pause(event=event, actor="staff:x", now=timezone.now())
    tickets = fans_join(event.slug, 3)
    later = timezone.now() + timedelta(seconds=event.heartbeat_seconds + 1)
    poll(tickets[1])  # seen just now: its deadline moves, but not past `later`
    tick(event, later)
    assert statuses(tickets) == ["expired"] * 3
    assert AuditRecord.objects.filter(action="expired").count() == 3
    assert poll(tickets[0])["status"] == "expired"


def test_the_admitted_fan_gets_a_pass_and_a_redirect(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    (ticket,) = fans_join(event.slug, 1)
    tick(event)
    body = poll(ticket)
    assert body["status"] == "admitted"
    assert body["pass"]
    assert body["redirect_url"].startswith(event.target_url + "?wr_pass=")
    assert body["pass_expires_at"]
    assert entry_of(ticket).pass_issued_at is not None


def test_sessions_end_when_their_pass_expires_and_free_the_slot(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, session_seconds=60, heartbeat_seconds=600)
    first, second = fans_join(event.slug, 2)
    tick(event)
    poll(first)  # claims the pass
    assert tick(event, timezone.now() + timedelta(seconds=30)).admitted == ()
    tick(event, timezone.now() + timedelta(seconds=61))
    assert statuses([first, second]) == ["expired", "admitted"]
    assert AuditRecord.objects.get(action="expired").data["reason"] == "pass_expired"


def test_an_admission_nobody_claims_is_released(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=30)
    first, _second = fans_join(event.slug, 2)
    tick(event)  # the first fan is let in but never comes back for the pass
    tick(event, timezone.now() + timedelta(seconds=31))
    assert statuses([first])[0] == "expired"
    record = AuditRecord.objects.get(action="expired", ticket_id=entry_of(first).public_id)
    assert record.data["reason"] == "not_claimed"


def test_leaving_after_admission_gives_the_slot_back(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    first, second = fans_join(event.slug, 2)
    tick(event)
    from django.test import Client

    Client().delete(f"/api/v1/tickets/{first}")
    tick(event)
    assert statuses([first, second]) == ["abandoned", "admitted"]


@pytest.mark.parametrize("lanes", [1, 4])
def test_waiting_fans_see_an_eta_that_grows_with_position(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=60)
    tickets = fans_join(event.slug, 5)
    etas = [poll(t)["eta"] for t in tickets]
    assert all(e is not None for e in etas)
    assert [round(e["p50"]) for e in etas] == [1, 2, 3, 4, 5]
    assert all(e["p10"] <= e["p50"] <= e["p90"] for e in etas)
    assert entry_of(tickets[2]).quoted_p50 == pytest.approx(3.0)


def test_admission_control_refuses_joins_predicted_to_wait_too_long(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=60, max_wait_seconds=3)
    responses = [join(new_fan(), event.slug) for _ in range(5)]
    assert [r.status_code for r in responses] == [201, 201, 201, 429, 429]
    assert responses[3].json()["error"] == "queue_full"
    assert int(responses[3]["Retry-After"]) >= 1


@pytest.mark.parametrize("lanes", [1, 4])
def test_concurrent_admission_runs_never_admit_twice(transactional_db, make_event) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    event = make_event(capacity=0, rate_per_minute=0)
    fans_join(event.slug, 40)
    tick(event)  # starts the line and admits everyone
    assert QueueEntry.objects.filter(status=EntryStatus.ADMITTED).count() == 40
    fans_join(event.slug, 40)

    def run(_):
        try:
            return admission_run(event_id=event.id, now=timezone.now())
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(run, range(8)))
    admitted_ids = [m.id for o in outcomes for m in o.admitted]
    assert len(admitted_ids) == len(set(admitted_ids)) == 40
    assert AuditRecord.objects.filter(action="admitted").count() == 80


def test_no_token_debt_builds_up_while_the_rate_is_off(make_event) -> None:
    from staff.services import event_update

    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    fans_join(event.slug, 30)
    now = timezone.now()
    assert len(tick(event, now).admitted) == 30
    event = event_update(event=event, actor="staff:x", now=now, changes={"rate_per_minute": 60})
    late = fans_join(event.slug, 3)
    admitted = sum(len(tick(event, now + timedelta(seconds=s)).admitted) for s in range(1, 4))
    assert admitted == 3
    assert statuses(late) == ["admitted"] * 3


def test_a_healthy_overlapping_run_does_not_force_a_rebuild(make_event, monkeypatch) -> None:
    from queueing.line import admission

    event = make_event(capacity=0, rate_per_minute=0)
    fans_join(event.slug, 4)
    tick(event)
    fans_join(event.slug, 4)
    real = admission.index_forget
    overlapped = []

    def slow_index_update(event_id, moved):
        if not overlapped:
            overlapped.append(True)
            admission_run(event_id=event_id, now=timezone.now())
        return real(event_id, moved)

    monkeypatch.setattr(admission, "index_forget", slow_index_update)
    admission_run(event_id=event.id, now=timezone.now())
    event.refresh_from_db()
    assert not event.hot_index_dirty
