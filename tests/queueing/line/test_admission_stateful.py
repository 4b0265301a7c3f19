"""Random sequences of joins, leaves, completions, expiries, ticks and pauses never break the
line's promises: no double admission, FIFO within a tier, active <= capacity, and at most
``rate`` admissions in any 60-second window."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from queueing.beat import event_tick
from queueing.hot import epoch
from queueing.line.answers import ticket_poll
from queueing.line.joining import entry_join
from queueing.line.leaving import entry_leave
from queueing.line.sessions import pass_complete
from queueing.models import AuditRecord, QueueEntry
from queueing.passes.signing import pass_issue
from queueing.rules.states import EntryStatus
from queueing.rules.ticket_codec import ticket_read
from staff.services import TierSpec, event_create, event_pause, event_resume

pytestmark = pytest.mark.django_db


class LineMachine(RuleBasedStateMachine):
    lanes = 1  # the machine over a line of several lanes: LanedLineMachine

    def __init__(self) -> None:
        super().__init__()
        self.now = timezone.now()
        self.capacity = 3
        self.rate = 4
        self.event = event_create(
            actor="test",
            now=self.now,
            slug=f"m{uuid.uuid4().hex[:12]}",
            name="machine",
            target_url="https://shop.example/",
            capacity=self.capacity,
            rate_per_minute=self.rate,
            heartbeat_seconds=45,
            session_seconds=60,
            lanes=self.lanes,
            tiers=[
                TierSpec("VIP", priority=1, access_codes=["VIP"]),
                TierSpec("Fans", priority=5, share=2, access_codes=["FAN"]),
                TierSpec("General", priority=9, share=1),
            ],
        )
        epoch.mark_new_event_ready(self.event.id, lanes=self.lanes)
        self.tickets: list[str] = []
        self.paused = False

    def _entries(self, status: EntryStatus) -> list[QueueEntry]:
        return list(QueueEntry.objects.filter(event=self.event, status=status))

    @rule(code=st.sampled_from([None, None, "VIP", "FAN"]), count=st.integers(1, 4))
    def join(self, code: str | None, count: int) -> None:
        for _ in range(count):
            result = entry_join(
                event=self.event, identity=uuid.uuid4().hex, access_code=code, now=self.now
            )
            self.tickets.append(result.answer.ticket)

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if self.tickets:
            ticket = data.draw(st.sampled_from(self.tickets))
            entry_leave(ref=ticket_read(ticket), now=self.now)

    @rule(data=st.data(), outcome=st.sampled_from(["completed", "abandoned"]))
    def shop_reports(self, data: st.DataObject, outcome: str) -> None:
        admitted = self._entries(EntryStatus.ADMITTED)
        if not admitted:
            return
        entry = data.draw(st.sampled_from(admitted))
        token = pass_issue(
            event_slug=self.event.slug,
            ticket_id=entry.public_id,
            tier="x",
            admitted_at=entry.admitted_at,
            expires_at=entry.pass_expires_at,
            now=self.now,
        )
        pass_complete(
            token=token,
            outcome=outcome,
            integration_key=self.event.integration_key,
            now=self.now,
        )

    @rule()
    def everyone_polls(self) -> None:
        for ticket in self.tickets:
            try:
                ticket_poll(ref=ticket_read(ticket), ticket=ticket, now=self.now)
            except Exception as error:
                raise AssertionError(f"status failed: {error}") from error

    @rule(seconds=st.sampled_from([1, 2, 5, 15, 31, 61]))
    def time_passes_and_the_room_ticks(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        event_tick(event_id=self.event.id, now=self.now)

    @rule()
    def staff_toggle_pause(self) -> None:
        service = event_resume if self.paused else event_pause
        self.event = service(event=self.event, actor="staff:x", now=self.now)
        self.paused = not self.paused

    @invariant()
    def nobody_is_admitted_twice(self) -> None:
        ids = list(
            AuditRecord.objects.filter(event=self.event, action="admitted").values_list(
                "ticket_id", flat=True
            )
        )
        assert len(ids) == len(set(ids))

    @invariant()
    def a_fan_passed_over_holds_no_slot(self) -> None:
        passed = QueueEntry.objects.filter(event=self.event, passed_over_at__isnull=False)
        assert not passed.filter(status=EntryStatus.ADMITTED).exists()

    @invariant()
    def active_never_exceeds_capacity(self) -> None:
        assert len(self._entries(EntryStatus.ADMITTED)) <= self.capacity

    @invariant()
    def fifo_within_each_tier(self) -> None:
        # Fans passed over while away (queueing/line/away.py) are the documented exception:
        # back, they go in first, after some who were behind them. Everyone else: FIFO.
        passed_over = AuditRecord.objects.filter(event=self.event, action="away").values(
            "ticket_id"
        )
        entries = QueueEntry.objects.filter(event=self.event).exclude(public_id__in=passed_over)
        for tier_id in set(entries.values_list("tier_id", flat=True)):
            waiting = entries.filter(tier_id=tier_id, status=EntryStatus.WAITING)
            ever_admitted = entries.filter(tier_id=tier_id, admitted_at__isnull=False)
            if waiting.exists() and ever_admitted.exists():
                first_waiting = min(waiting.values_list("order_key", flat=True))
                last_admitted = max(ever_admitted.values_list("order_key", flat=True))
                assert last_admitted < first_waiting

    @invariant()
    def at_most_rate_admissions_in_any_minute(self) -> None:
        times = sorted(
            QueueEntry.objects.filter(event=self.event, admitted_at__isnull=False).values_list(
                "admitted_at", flat=True
            )
        )
        for i, start in enumerate(times):
            in_window = [t for t in times[i:] if t < start + timedelta(seconds=60)]
            assert len(in_window) <= self.rate


class LanedLineMachine(LineMachine):
    lanes = 4


@pytest.mark.parametrize("machine", [LineMachine, LanedLineMachine])
def test_the_line_keeps_its_promises_under_random_operations(machine: type[LineMachine]) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
