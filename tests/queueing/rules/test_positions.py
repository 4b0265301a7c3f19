from queueing.rules.layout import (
    MAX_POLL_SECONDS,
    MIN_POLL_SECONDS,
    EventLayout,
    TierLayout,
    poll_after_seconds,
    position_in_line,
)

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


def test_a_degraded_answer_asks_to_come_back_three_times_later() -> None:
    normal = poll_after_seconds(heartbeat_seconds=600, position=100)
    assert normal == 5.0
    assert poll_after_seconds(heartbeat_seconds=600, position=100, degraded=True) == 15.0


def test_a_degraded_answer_never_waits_past_half_a_heartbeat_or_a_minute() -> None:
    # Far fans of a short heartbeat: a third of it, grown to half of it, no more.
    assert poll_after_seconds(heartbeat_seconds=10, position=5_000) == 3.3
    assert poll_after_seconds(heartbeat_seconds=10, position=5_000, degraded=True) == 5.0
    assert poll_after_seconds(heartbeat_seconds=60, position=None, degraded=True) == 30.0
    assert poll_after_seconds(heartbeat_seconds=3600, position=10**6, degraded=True) == 60.0
    for heartbeat in (10, 11, 30, 60, 90, 120, 600, 3600):
        for position in (None, 1, 7, 50, 400, 10**6):
            normal = poll_after_seconds(heartbeat_seconds=heartbeat, position=position)
            degraded = poll_after_seconds(
                heartbeat_seconds=heartbeat, position=position, degraded=True
            )
            assert normal <= degraded <= max(normal, min(60.0, heartbeat / 2))
