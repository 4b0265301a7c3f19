"""The catalogue's SQL agrees with Event.state_at, on every schedule and at every boundary."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from events.catalogue import GROUP_STATES, Group, group_counts, in_group, in_states, search
from events.models import Event, EventControl, EventState

pytestmark = pytest.mark.django_db

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)  # PostgreSQL keeps microseconds: the finest boundary
# Every time a schedule field can take around NOW: unset, well before, just before, exactly
# now, just after, well after.
TIMES: tuple[datetime | None, ...] = (
    None,
    NOW - timedelta(hours=1),
    NOW - TICK,
    NOW,
    NOW + TICK,
    NOW + timedelta(hours=1),
)


def _allowed(opens: datetime | None, starts: datetime | None, ends: datetime | None) -> bool:
    """The schedules the table's check constraints accept."""
    if opens and starts and starts < opens:
        return False
    return not (starts and ends and ends <= starts)


def every_schedule() -> list[Event]:
    events = []
    combinations = itertools.product(EventControl.values, TIMES, TIMES, TIMES)
    for n, (control, opens, starts, ends) in enumerate(combinations):
        if _allowed(opens, starts, ends):
            events.append(
                Event(
                    slug=f"e{n}",
                    name=f"Event {n}",
                    target_url="https://shop.example/",
                    control=control,
                    prequeue_opens_at=opens,
                    starts_at=starts,
                    ends_at=ends,
                    closed_at=NOW - timedelta(minutes=n) if control == "closed" else None,
                )
            )
    return Event.objects.bulk_create(events)


def test_every_state_filter_matches_state_at_exactly() -> None:
    events = every_schedule()
    by_python = {state: set() for state in EventState}
    for event in events:
        by_python[event.state_at(NOW)].add(event.pk)
    assert all(by_python.values()), "every state is represented"
    for state in EventState:
        in_sql = set(in_states(Event.objects.all(), [state], NOW).values_list("pk", flat=True))
        assert in_sql == by_python[state], state


@pytest.mark.parametrize(
    ("fields", "state"),
    [
        ({"ends_at": NOW}, EventState.CLOSED),  # the end is the first closed instant
        ({"ends_at": NOW + TICK}, EventState.OPEN),
        # no longer scheduled:
        ({"prequeue_opens_at": NOW, "starts_at": NOW + TICK}, EventState.PREQUEUE),
        ({"prequeue_opens_at": NOW + TICK}, EventState.SCHEDULED),
        ({"starts_at": NOW}, EventState.OPEN),  # admission starts at the start
        ({"starts_at": NOW + TICK}, EventState.PREQUEUE),
        ({"control": EventControl.PAUSED, "starts_at": NOW + TICK}, EventState.PREQUEUE),
        ({"control": EventControl.PAUSED}, EventState.PAUSED),
        ({"control": EventControl.CLOSED, "prequeue_opens_at": NOW + TICK}, EventState.CLOSED),
    ],
)
def test_boundaries(fields: dict, state: EventState) -> None:
    fields = {"prequeue_opens_at": None, "starts_at": None, "ends_at": None, **fields}
    event = Event.objects.create(slug="b", name="B", target_url="https://shop.example/", **fields)
    assert event.state_at(NOW) == state
    assert list(in_states(Event.objects.all(), [state], NOW)) == [event]
    others = [s for s in EventState if s != state]
    assert not in_states(Event.objects.all(), others, NOW).exists()


def test_groups_partition_the_states_and_are_counted_in_one_query(
    django_assert_num_queries,
) -> None:
    events = every_schedule()
    expected = {
        group: sum(1 for e in events if e.state_at(NOW) in GROUP_STATES[group]) for group in Group
    }
    with django_assert_num_queries(1):
        counts = group_counts(Event.objects.all(), NOW)
    assert counts == expected
    assert sum(counts.values()) == len(events)
    grouped = [
        set(in_group(Event.objects.all(), g, NOW).values_list("pk", flat=True)) for g in Group
    ]
    assert set.union(*grouped) == {e.pk for e in events}
    assert sum(map(len, grouped)) == len(events)


def _event(slug: str, **fields) -> Event:
    return Event.objects.create(
        slug=slug, name=slug.title(), target_url="https://s.example/", **fields
    )


def test_each_group_is_in_the_order_staff_read_it() -> None:
    hour = timedelta(hours=1)
    later = _event("later", prequeue_opens_at=NOW + 3 * hour, starts_at=NOW + 4 * hour)
    soon = _event("soon", prequeue_opens_at=NOW + hour, starts_at=NOW + 5 * hour)
    soon_too = _event("soon-too", prequeue_opens_at=NOW + hour, starts_at=NOW + 5 * hour)
    old = _event("old", starts_at=NOW - 2 * hour)
    waiting = _event("waiting", prequeue_opens_at=NOW - hour, starts_at=NOW + hour)
    recent = _event("recent", starts_at=NOW - hour)
    ended_early = _event(
        "early", control=EventControl.CLOSED, closed_at=NOW - hour, ends_at=NOW + hour
    )
    ended_late = _event("late", starts_at=NOW - 3 * hour, ends_at=NOW - 2 * hour)
    just_closed = _event("just", control=EventControl.CLOSED, closed_at=NOW - TICK)

    def order(group: Group) -> list[Event]:
        return list(in_group(Event.objects.all(), group, NOW))

    assert order(Group.UPCOMING) == [soon, soon_too, later]
    assert order(Group.LIVE) == [old, recent, waiting]
    assert order(Group.ENDED) == [just_closed, ended_early, ended_late]


def test_search_matches_name_or_slug_ignoring_case() -> None:
    arena = _event("arena-tour")
    _event("club-night")
    Event.objects.filter(pk=arena.pk).update(name="Summer ARENA Tour")
    assert list(search(Event.objects.all(), "  arena ")) == [arena]
    assert list(search(Event.objects.all(), "ARENA-T")) == [arena]
    assert list(search(Event.objects.all(), "100%_")) == []  # wildcards are taken literally
    assert search(Event.objects.all(), "").count() == 2
