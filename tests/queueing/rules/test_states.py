import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from queueing.models import QueueEntry
from queueing.rules.states import TERMINAL, TRANSITIONS, EntryStatus, can_transition


def test_terminal_statuses_lead_nowhere() -> None:
    assert set(TERMINAL) == {
        EntryStatus.COMPLETED,
        EntryStatus.ABANDONED,
        EntryStatus.EXPIRED,
        EntryStatus.LEFT,
        EntryStatus.REVOKED,
    }
    assert all(not TRANSITIONS[s] for s in TERMINAL)


def test_an_admitted_ticket_cannot_go_back_in_line() -> None:
    assert not can_transition(EntryStatus.ADMITTED, EntryStatus.WAITING)
    assert can_transition(EntryStatus.WAITING, EntryStatus.ADMITTED)


@pytest.mark.django_db
def test_the_database_refuses_inconsistent_rows(event) -> None:
    tier = event.tiers.get()
    now = timezone.now()
    base = dict(event=event, tier=tier, joined_at=now, status_changed_at=now)
    bad_rows = [
        dict(identity="a", status="bogus"),
        dict(identity="b", status=EntryStatus.WAITING, admitted_at=now),
        dict(identity="c", status=EntryStatus.ADMITTED),
        dict(identity="d", status=EntryStatus.LEFT),  # terminal without ended_at
        dict(identity="e", status=EntryStatus.WAITING, ended_at=now),
    ]
    for row in bad_rows:
        with pytest.raises(IntegrityError), transaction.atomic():
            QueueEntry.objects.create(**base, **row)


@pytest.mark.django_db
def test_one_live_entry_per_identity_is_enforced_by_the_database(event) -> None:
    tier = event.tiers.get()
    now = timezone.now()
    base = dict(event=event, tier=tier, joined_at=now, status_changed_at=now, identity="same")
    QueueEntry.objects.create(**base, status=EntryStatus.WAITING)
    with pytest.raises(IntegrityError), transaction.atomic():
        QueueEntry.objects.create(**base, status=EntryStatus.PREQUEUE)
    # An ended ticket does not count: the fan may join again.
    QueueEntry.objects.filter(identity="same").update(status=EntryStatus.LEFT, ended_at=now)
    QueueEntry.objects.create(**base, status=EntryStatus.WAITING)
