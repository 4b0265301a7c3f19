import pytest

from queueing.rules.errors import QueueFull
from queueing.rules.eta import Throughput
from queueing.rules.layout import EventLayout, TierLayout
from queueing.rules.line_limits import join_quote

LAYOUT = EventLayout(
    event_id=1,
    slug="x",
    heartbeat_seconds=60,
    pace=1.0,
    tiers=(TierLayout(id=7, priority=10, share=0),),
)
ONE_A_SECOND = Throughput(lam=1.0, scv=0.0, measured=True)


def _quote(rank_in_tier=None, *, waiting_in_tier=100, max_wait_seconds=0):
    return join_quote(
        LAYOUT,
        tier_id=7,
        waiting=True,
        queue_length=waiting_in_tier,
        tier_counts=(waiting_in_tier,),
        throughput=ONE_A_SECOND,
        max_queue_length=0,
        max_wait_seconds=max_wait_seconds,
        full_retry_after=30,
        rank_in_tier=rank_in_tier,
    )


def test_a_newcomer_is_quoted_at_the_back_unless_a_place_is_given() -> None:
    back = _quote()
    assert _quote(rank_in_tier=100).p50 == back.p50
    near_front = _quote(rank_in_tier=4)
    assert near_front.p50 < back.p50 / 10


def test_the_wait_limit_is_judged_at_the_back_whatever_the_place() -> None:
    with pytest.raises(QueueFull):
        _quote(rank_in_tier=0, max_wait_seconds=50)
    assert _quote(rank_in_tier=0, waiting_in_tier=20, max_wait_seconds=50) is not None
