from queueing.rules.layout import EventLayout, TierLayout
from queueing.rules.polling import MAX_POLL_SECONDS, MIN_POLL_SECONDS, poll_after_seconds
from queueing.rules.positions import position_in_line

LAYOUT = EventLayout(
    event_id=1,
    slug="x",
    heartbeat_seconds=60,
    pace=None,
    tiers=(TierLayout(id=7, priority=10, share=0), TierLayout(id=3, priority=100, share=0)),
)


def test_first_in_the_first_tier_is_next() -> None:
    assert position_in_line(LAYOUT, tier_id=7, rank_in_tier=0, tier_counts=(5, 9)) == 1


def test_everyone_in_a_higher_priority_tier_is_ahead() -> None:
    assert position_in_line(LAYOUT, tier_id=3, rank_in_tier=0, tier_counts=(5, 9)) == 6
    assert position_in_line(LAYOUT, tier_id=3, rank_in_tier=8, tier_counts=(5, 9)) == 14


def test_poll_interval_keeps_a_ticket_alive_and_shrinks_near_the_front() -> None:
    far = poll_after_seconds(heartbeat_seconds=60, position=10_000)
    near = poll_after_seconds(heartbeat_seconds=60, position=3)
    assert far <= 60 / 3
    assert near == MIN_POLL_SECONDS
    assert near < far


def test_poll_interval_is_bounded() -> None:
    assert poll_after_seconds(heartbeat_seconds=3600, position=None) == MAX_POLL_SECONDS
    assert poll_after_seconds(heartbeat_seconds=10, position=None) >= MIN_POLL_SECONDS
