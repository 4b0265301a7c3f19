"""Each lane of a line has its own hash tag: on a Redis Cluster an on-sale's lanes land in
different slots, over more than one master; lane 0 keeps the tag a one-lane line always had."""

from redis.crc import key_slot

from queueing.hot import keys

# A loopback cluster of three masters splits the 16384 slots in three even ranges.
MASTERS = ((0, 5460), (5461, 10922), (10923, 16383))


def _master(slot: int) -> int:
    return next(i for i, (low, high) in enumerate(MASTERS) if low <= slot <= high)


def test_lane_0_keeps_the_on_sales_own_tag(settings) -> None:
    settings.WR_REDIS_PREFIX = "wr"
    assert keys.tier_queue(42, 7) == keys.tier_queue(42, 7, 0) == "wr:{42}:q:7"
    assert keys.tier_queue(42, 7, 3) == "wr:{42.3}:q:7"


def test_eight_lanes_spread_over_slots_and_masters(settings) -> None:
    for event_id in (1, 2, 17, 12345):
        slots = [key_slot(keys.epoch(event_id, lane).encode()) for lane in range(8)]
        assert len(set(slots)) == 8
        assert len({_master(slot) for slot in slots}) > 1
        # Every key of a lane shares its slot (one script touches one slot).
        for lane in range(8):
            lane_keys = [
                keys.epoch(event_id, lane),
                keys.heartbeats(event_id, lane),
                keys.prequeue(event_id, lane),
                keys.tier_queue(event_id, 3, lane),
                keys.holders(event_id, lane),
                keys.tombstones(event_id, lane),
                keys.ticket_sockets(event_id, 99, lane),
            ]
            assert len({key_slot(k.encode()) for k in lane_keys}) == 1
        # The on-sale's own keys stay with lane 0.
        for key in (keys.stats(event_id), keys.lanes_summary(event_id), keys.tick_claim(event_id)):
            assert key_slot(key.encode()) == slots[0]
