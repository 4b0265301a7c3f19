"""The on-sale's modes (docs/api.md, "Modes"): what a join is answered and what becomes of
its entry in queue, safety net, passthrough and maintenance; what the admission run does in
each; switching between them."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from events.models import Event
from queueing.line.admission import ADMISSION_LOCK_NAMESPACE, ManualAdmission, admission_run
from queueing.line.joining import JoinRequest, JoinResult, entry_join, entry_join_many
from queueing.line.reads import event_layout, event_public_view
from queueing.line.sessions import pass_complete, pass_verify
from queueing.live.ticks import tick_payload
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit import audit_chain_verify
from queueing.rules.errors import EventMaintenance
from staff.services import event_pause, event_update
from tests.helpers import entry_of, join, new_fan, poll, statuses, tick

pytestmark = pytest.mark.django_db


def opened(event: Event) -> Event:
    """The on-sale with its line started (the first tick after it opens does that)."""
    tick(event)
    event.refresh_from_db()
    assert event.started_at is not None
    return event


def switch(event: Event, mode: str) -> Event:
    return event_update(event=event, actor="staff:ann", now=timezone.now(), changes={"mode": mode})


def actions_of(ticket: str) -> list[tuple[str, str]]:
    public_id = entry_of(ticket).public_id
    return list(
        AuditRecord.objects.filter(ticket_id=public_id)
        .order_by("seq")
        .values_list("action", "actor")
    )


# -- queue -------------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", [1, 4])
def test_in_queue_mode_a_join_on_an_empty_line_waits_for_the_tick(make_event) -> None:
    event = opened(make_event(capacity=5, rate_per_minute=0))
    reply = join(new_fan(), event.slug)
    body = reply.json()
    assert reply.status_code == 201
    assert (body["status"], body["position"]) == ("waiting", 1)
    assert (body["pass"], body["pass_expires_at"], body["redirect_url"]) == (None, None, None)
    assert entry_of(body["ticket"]).status == "waiting"
    assert len(tick(event).admitted) == 1


# -- safety net --------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_admits_in_the_join_when_nobody_waits(make_event) -> None:
    event = opened(make_event(mode="safety_net", capacity=2, rate_per_minute=0))
    reply = join(new_fan(), event.slug)
    body = reply.json()
    assert reply.status_code == 201
    assert body["status"] == "admitted"
    assert body["position"] is None and body["eta"] is None
    assert body["pass"] and body["pass_expires_at"]
    assert body["redirect_url"].startswith("https://shop.example/checkout?wr_pass=")
    entry = entry_of(body["ticket"])
    assert entry.status == "admitted"
    assert entry.admitted_at is not None and entry.pass_issued_at is not None
    # The same pass and redirect the ticket endpoint gives (the fan's return URL included:
    # both come from sessions.entry_pass).
    polled = poll(body["ticket"])
    assert (polled["status"], polled["pass"], polled["redirect_url"]) == (
        "admitted",
        body["pass"],
        body["redirect_url"],
    )
    assert pass_verify(token=body["pass"], now=timezone.now()).valid
    # Joined, then admitted, in the same transaction and the on-sale's one chain.
    assert actions_of(body["ticket"]) == [("joined", "fan"), ("admitted", "system:admission")]
    admitted = AuditRecord.objects.get(ticket_id=entry.public_id, action="admitted")
    assert admitted.data["mode"] == "safety_net"
    assert audit_chain_verify(event_id=event.id).ok
    # Not in the hot index's line: the next tick has nobody to admit, the count is right.
    assert tick(event).admitted == ()
    view = event_public_view(event, now=timezone.now())
    assert (view.queue_length, view.active) == (0, 1)


@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_queues_once_the_shop_is_full(make_event) -> None:
    event = opened(make_event(mode="safety_net", capacity=2, rate_per_minute=0))
    replies = [join(new_fan(), event.slug).json() for _ in range(4)]
    assert [r["status"] for r in replies] == ["admitted", "admitted", "waiting", "waiting"]
    assert [r["position"] for r in replies[2:]] == [1, 2]
    assert replies[2]["pass"] is None


@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_queues_behind_anyone_waiting_even_with_room(make_event) -> None:
    event = opened(make_event(mode="safety_net", capacity=1, rate_per_minute=0))
    first, second = (join(new_fan(), event.slug).json() for _ in range(2))
    assert (first["status"], second["status"]) == ("admitted", "waiting")
    # The first fan's session ends: a place is free, but the second fan was there first.
    assert pass_complete(
        token=first["pass"],
        outcome="completed",
        integration_key=event.integration_key,
        now=timezone.now(),
    )
    third = join(new_fan(), event.slug).json()
    assert (third["status"], third["position"]) == ("waiting", 2)
    outcome = tick(event)
    assert [m.public_id for m in outcome.admitted] == [entry_of(second["ticket"]).public_id]
    assert statuses([second["ticket"], third["ticket"]]) == ["admitted", "waiting"]


@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_queues_once_the_pace_is_spent_and_counts_like_the_tick(make_event) -> None:
    event = opened(
        make_event(mode="safety_net", capacity=0, rate_per_minute=1, heartbeat_seconds=3600)
    )
    start = timezone.now()
    first, second = (join(new_fan(), event.slug).json() for _ in range(2))
    assert (first["status"], second["status"]) == ("admitted", "waiting")
    # The join's admission spent the credit and fills the 60-second window, as a tick's would:
    # the ticks of the next minute let nobody in.
    for second_ in range(1, 55, 5):
        assert tick(event, start + timedelta(seconds=second_)).admitted == ()
    assert len(tick(event, start + timedelta(seconds=65)).admitted) == 1
    assert entry_of(second["ticket"]).status == "admitted"


@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_takes_only_the_room_there_is_in_one_batch(make_event) -> None:
    event = opened(make_event(mode="safety_net", capacity=3, rate_per_minute=0))
    now = timezone.now()
    outcomes = entry_join_many(
        [JoinRequest(event=event, identity=f"fan-{i}", access_code=None, now=now) for i in range(5)]
    )
    assert all(isinstance(o, JoinResult) for o in outcomes)
    views = [o.answer for o in outcomes if isinstance(o, JoinResult)]
    assert [v.status for v in views] == ["admitted"] * 3 + ["waiting"] * 2
    assert [v.position for v in views[3:]] == [1, 2]
    assert all(v.issued_pass is not None for v in views[:3])


@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_does_not_admit_while_paused_or_before_the_start(make_event) -> None:
    event = make_event(mode="safety_net", capacity=5, rate_per_minute=0, starts_at=later())
    before_start = join(new_fan(), event.slug).json()
    assert before_start["status"] == "prequeue"  # the shuffle at the start, then admission
    start_now(event)
    assert len(tick(event).admitted) == 1
    event_pause(event=event, actor="staff:ann", now=timezone.now())
    assert join(new_fan(), event.slug).json()["status"] == "waiting"


@pytest.mark.parametrize("mode", ["safety_net", "passthrough"])
@pytest.mark.parametrize("lanes", [1, 4])
def test_a_new_on_sale_lets_in_the_joins_of_its_first_second_without_a_tick(
    make_event, mode
) -> None:
    """Nothing scheduled: the line starts with the on-sale, not at the beat's first tick."""
    event = make_event(mode=mode, capacity=2, rate_per_minute=0)
    assert event.started_at is not None
    replies = [join(new_fan(), event.slug).json() for _ in range(2)]
    assert [r["status"] for r in replies] == ["admitted", "admitted"]
    assert all(r["pass"] for r in replies)
    # The start's record, once: written with the on-sale, not again by the ticks.
    tick(event)
    tick(event)
    assert AuditRecord.objects.filter(event=event, action="shuffled").count() == 1
    assert audit_chain_verify(event_id=event.id).ok


@pytest.mark.parametrize("mode", ["safety_net", "passthrough"])
@pytest.mark.parametrize("lanes", [1, 4])
def test_a_join_after_a_start_no_tick_has_made_yet_starts_the_line(make_event, mode) -> None:
    event = make_event(mode=mode, capacity=2, rate_per_minute=0, starts_at=later())
    # The start comes (here brought forward by staff) and the beat has not ticked since.
    event = start_now(event)
    assert event.started_at is None
    replies = [join(new_fan(), event.slug).json() for _ in range(2)]
    assert [r["status"] for r in replies] == ["admitted", "admitted"]
    event.refresh_from_db()
    assert event.started_at is not None
    tick(event)
    (started,) = AuditRecord.objects.filter(event=event, action="shuffled")
    assert (started.actor, started.data["cohort"]) == ("system:schedule", 0)
    assert audit_chain_verify(event_id=event.id).ok


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_join_leaves_a_due_pre_queue_shuffle_to_the_tick_and_is_shuffled_with_it(
    make_event,
) -> None:
    """Decided: a pre-queue's start is its shuffle (the cohort moved, the hot index rebuilt),
    the tick's work and not a request's; a newcomer who comes after ``starts_at`` but before
    it joins the pre-queue and is shuffled with the cohort."""
    event = make_event(mode="safety_net", capacity=5, rate_per_minute=0, starts_at=later())
    early = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    event = start_now(event)
    gap = join(new_fan(), event.slug).json()
    assert gap["status"] == "prequeue"
    event.refresh_from_db()
    assert event.started_at is None
    assert len(tick(event).admitted) == 4
    assert statuses([*early, gap["ticket"]]) == ["admitted"] * 4
    (shuffled,) = AuditRecord.objects.filter(event=event, action="shuffled")
    assert shuffled.data["cohort"] == 4


def later() -> datetime:
    return timezone.now() + timedelta(minutes=5)


def start_now(event: Event) -> Event:
    """Staff bring the start forward to this moment; no tick has run since."""
    now = timezone.now()
    return event_update(event=event, actor="staff:ann", now=now, changes={"starts_at": now})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lanes", [1, 4])
def test_safety_net_never_waits_for_a_running_admission_and_never_overlaps_it(
    make_event,
) -> None:
    """While a run holds the admission lock (here: another transaction holding it), a join
    neither waits for it nor lets anyone in: it queues, and that run or the next admits."""
    event = opened(make_event(mode="safety_net", capacity=5, rate_per_minute=0))
    held, release = threading.Event(), threading.Event()

    def a_running_admission() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", [ADMISSION_LOCK_NAMESPACE, event.id]
                )
                held.set()
                release.wait(timeout=10)
        finally:
            connection.close()

    holder = threading.Thread(target=a_running_admission)
    holder.start()
    try:
        assert held.wait(timeout=5)
        body = join(new_fan(), event.slug).json()
        assert body["status"] == "waiting"
    finally:
        release.set()
        holder.join()
    assert len(tick(event).admitted) == 1
    assert entry_of(body["ticket"]).status == "admitted"


# -- passthrough -------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", [1, 4])
def test_passthrough_admits_every_join_past_capacity_and_pace_and_audits_it(make_event) -> None:
    event = opened(make_event(mode="passthrough", capacity=1, rate_per_minute=1))
    replies = [join(new_fan(), event.slug).json() for _ in range(4)]
    assert [r["status"] for r in replies] == ["admitted"] * 4
    assert all(r["pass"] and r["redirect_url"] for r in replies)
    assert statuses([r["ticket"] for r in replies]) == ["admitted"] * 4
    for reply in replies:
        assert actions_of(reply["ticket"]) == [("joined", "fan"), ("admitted", "system:admission")]
    assert AuditRecord.objects.filter(event=event, action="admitted").count() == 4
    # Counted: in the shop past its capacity, and in the pace's window once back in queue.
    assert event_public_view(event, now=timezone.now()).active == 4
    switch(event, "queue")
    later = join(new_fan(), event.slug).json()
    assert later["status"] == "waiting"
    for reply in replies:  # the shop is empty again, but passthrough spent the minute's pace
        assert pass_complete(
            token=reply["pass"],
            outcome="completed",
            integration_key=event.integration_key,
            now=timezone.now(),
        )
    assert tick(event).admitted == ()


@pytest.mark.parametrize("lanes", [1, 4])
def test_switching_to_passthrough_lets_the_waiting_line_in_at_the_next_ticks(
    make_event, settings
) -> None:
    settings.WR_ADMISSION_BATCH = 3
    event = opened(make_event(capacity=1, rate_per_minute=1))
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(6)]
    assert len(tick(event).admitted) == 1
    switch(event, "passthrough")
    now = timezone.now()
    assert len(tick(event, now + timedelta(seconds=1)).admitted) == 3  # a batch, past capacity
    assert len(tick(event, now + timedelta(seconds=2)).admitted) == 2
    assert statuses(tickets) == ["admitted"] * 6
    assert AuditRecord.objects.filter(event=event, action="admitted").count() == 6


# -- maintenance -------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", [1, 4])
def test_maintenance_refuses_new_joins_with_409(make_event) -> None:
    event = opened(make_event(mode="maintenance", capacity=5))
    reply = join(new_fan(), event.slug)
    assert reply.status_code == 409
    assert reply.json() == {
        "error": "event_maintenance",
        "detail": "The on-sale is closed for maintenance.",
    }
    assert not QueueEntry.objects.exists()


@pytest.mark.parametrize("lanes", [1, 4])
def test_maintenance_keeps_the_line_and_the_tick_admits_nobody(make_event) -> None:
    event = opened(make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=60))
    fans = [new_fan() for _ in range(4)]
    tickets = [join(fan, event.slug).json()["ticket"] for fan in fans]
    assert len(tick(event).admitted) == 1
    assert pass_complete(
        token=poll(tickets[0])["pass"],
        outcome="completed",
        integration_key=event.integration_key,
        now=timezone.now(),
    )
    switch(event, "maintenance")
    start = timezone.now()
    for second in range(1, 6):
        assert tick(event, start + timedelta(seconds=second)).admitted == ()
    assert admission_run(event_id=event.id, now=timezone.now()).skipped == "maintenance"
    manual = ManualAdmission(count=2, actor="staff:ann")
    assert admission_run(event_id=event.id, now=timezone.now(), manual=manual).skipped == (
        "maintenance"
    )
    # The waiting keep their places, and polling keeps them alive as in any mode.
    assert [poll(t)["position"] for t in tickets[1:]] == [1, 2, 3]
    assert statuses(tickets[1:]) == ["waiting"] * 3
    # A fan who holds a ticket and joins again gets it back; nobody new gets in.
    again = join(fans[2], event.slug)
    assert (again.status_code, again.json()["ticket"]) == (200, tickets[2])
    assert join(new_fan(), event.slug).status_code == 409
    # Back to queue: admission resumes from the front.
    switch(event, "queue")
    outcome = tick(event, start + timedelta(seconds=10))
    assert [m.public_id for m in outcome.admitted] == [entry_of(tickets[1]).public_id]


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_join_reads_the_mode_again_under_the_chain_lock(make_event) -> None:
    """A join that read the on-sale before staff changed its mode commits under the mode of
    the moment it holds the chain head, which staff's change takes too."""
    event = opened(make_event(mode="passthrough", capacity=1, rate_per_minute=0))
    stale = Event.objects.get(pk=event.pk)
    switch(event, "queue")
    result = entry_join(event=stale, identity="late-1", access_code=None, now=timezone.now())
    assert result.answer.status == "waiting"
    stale = Event.objects.get(pk=event.pk)
    stale.mode = "safety_net"  # as read just before staff switched to maintenance
    switch(event, "maintenance")
    with pytest.raises(EventMaintenance):
        entry_join(event=stale, identity="late-2", access_code=None, now=timezone.now())
    assert QueueEntry.objects.count() == 1


@pytest.mark.parametrize("lanes", [1, 4])
def test_ticks_carry_the_mode_and_staffs_message(make_event) -> None:
    event = opened(make_event(capacity=1))
    switch(event, "maintenance")
    event = event_update(
        event=event, actor="staff:ann", now=timezone.now(), changes={"message": "Back at 9."}
    )
    layout = event_layout(event.id, fresh=True)
    assert layout is not None
    payload = tick_payload(event, layout, now=timezone.now())
    assert payload is not None
    assert (payload["mode"], payload["message"]) == ("maintenance", "Back at 9.")
    switch(event, "queue")
    event = event_update(
        event=event, actor="staff:ann", now=timezone.now(), changes={"message": ""}
    )
    payload = tick_payload(event, layout, now=timezone.now())
    assert payload is not None
    assert (payload["mode"], payload["message"]) == ("queue", None)


@pytest.mark.parametrize("lanes", [1, 4])
def test_mode_changes_are_audited_through_the_staff_api(make_event) -> None:
    event = make_event()
    switch(event, "safety_net")
    record = AuditRecord.objects.filter(event=event, action="event_changed").latest("seq")
    assert record.data == {"changes": {"mode": ["queue", "safety_net"]}}
    assert record.actor == "staff:ann"
