"""Every Redis key of the hot index, built here and nowhere else.

An on-sale's line is split in lanes (queueing/rules/lanes.py), and each lane's keys share
one hash tag, so that one script can touch them together on Redis Cluster while the lanes
spread over the cluster's masters: lane 0 keeps the on-sale's own tag ``{<event_id>}`` (so
a line of one lane has the keys it always had), lane k > 0 has ``{<event_id>.<k>}``. What is
the on-sale's as a whole (its pace, samples, last tick, tick claim, rebuild lock, the lanes'
summary) lives under lane 0's tag. The prefix comes from settings (tests give each test
its own).
"""

from __future__ import annotations

from django.conf import settings


def prefix() -> str:
    return settings.WR_REDIS_PREFIX


def _event(event_id: int, lane: int = 0) -> str:
    if lane:
        return f"{prefix()}:{{{event_id}.{lane}}}"
    return f"{prefix()}:{{{event_id}}}"


def event_patterns(event_id: int, lanes: int) -> list[str]:
    """SCAN patterns matching every key of the on-sale, one per lane's hash tag (an archived
    on-sale's keys are dropped by them: ``hot/forget.py``)."""
    return [f"{_glob_literal(_event(event_id, lane))}:*" for lane in range(max(lanes, 1))]


def _glob_literal(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def epoch(event_id: int, lane: int = 0) -> str:
    """``building:<redis run id>:<token>`` or ``ready:<run id>:<token>``; missing, or another
    Redis run id, means the lane's index cannot be trusted, and the on-sale's (every lane)
    is rebuilt. One per lane: each lane's master may fail over on its own."""
    return f"{_event(event_id, lane)}:epoch"


def tier_queue(event_id: int, tier_id: int, lane: int = 0) -> str:
    """Sorted set of the lane's waiting entry ids of one tier, scored by order key."""
    return f"{_event(event_id, lane)}:q:{tier_id}"


def prequeue(event_id: int, lane: int = 0) -> str:
    """Sorted set of the lane's pre-queue entry ids, scored by order key (no position until
    the start)."""
    return f"{_event(event_id, lane)}:pre"


def heartbeats(event_id: int, lane: int = 0) -> str:
    """Sorted set of the lane's queued entry ids scored by the unix time after which they
    expire."""
    return f"{_event(event_id, lane)}:hb"


def holders(event_id: int, lane: int = 0) -> str:
    """Hash of entry id -> holder key, for the lane's places in line that were moved to
    another browser (queueing/line/place_links.py): a poll whose ticket names another holder
    is not answered from the index but from the entry's row, which refuses it."""
    return f"{_event(event_id, lane)}:holders"


def admitted_counts(event_id: int, lane: int = 0) -> str:
    """Hash of how many admission let in, per tier: ``total:<tier>`` from the whole line
    and ``here:<tier>`` from this lane, kept in each lane of a line of several
    (queueing/hot/line_index.py ``admitted_count``), read by a poll with the rest of its lane."""
    return f"{_event(event_id, lane)}:admitted"


def join_view(event_id: int, member: int, lane: int = 0) -> str:
    """What a fan who just joined a line of several lanes was counted behind in the other
    lanes (JSON, then the lane's admission counts as they were), for a few seconds: until
    every process's summary of the lanes is newer than the join (queueing/line/lanes.py)."""
    return f"{_event(event_id, lane)}:view:{member}"


def lanes_summary(event_id: int) -> str:
    """The lanes' per-tier counts and checkpoints as the last tick read them (JSON), from
    which a fan is told how many wait ahead in the other lanes (queueing/line/lanes.py)."""
    return f"{_event(event_id)}:lanes"


def stats(event_id: int) -> str:
    """Hash of measured admission throughput: lam (per second), scv, measured (0/1)."""
    return f"{_event(event_id)}:stats"


def line_samples(event_id: int) -> str:
    """Hash of minute (unix minute) -> fans in line then, for the dashboard's last hour.
    Expires two hours after the last write."""
    return f"{_event(event_id)}:samples"


def last_tick(event_id: int) -> str:
    """The last broadcast tick (JSON), sent to a page in its snapshot when it connects."""
    return f"{_event(event_id)}:tick"


def tick_claim(event_id: int) -> str:
    """Held (with a short expiry) from when an event's tick is sent to the workers until it has
    run, so that the beat sends no second tick while one is queued: no backlog builds up."""
    return f"{_event(event_id)}:tick-claim"


def ticket_sockets(event_id: int, entry_id: int, lane: int = 0) -> str:
    """Sorted set of the channel names of the WebSockets open on one ticket, scored by arrival
    (1, 2, 3, ...): the oldest are closed when more open than WR_SOCKETS_PER_TICKET. Under
    the ticket's lane's tag, with the fan's other keys."""
    return f"{_event(event_id, lane)}:socks:{entry_id}"


def tombstones(event_id: int, lane: int = 0) -> str:
    """Set of the lane's entry ids removed while a rebuild runs: the rebuild must not load
    them again."""
    return f"{_event(event_id, lane)}:gone"


def rebuild_lock(event_id: int) -> str:
    return f"{_event(event_id)}:rebuild-lock"


def rebuild_requested(event_id: int) -> str:
    """Set for a few seconds after a request asked for a rebuild, so that it asks once."""
    return f"{_event(event_id)}:rebuild-requested"


def join_rate(scope: str, caller: str) -> str:
    """Recent joins of one caller (an IP address or an identity digest). Each caller's key is
    its own hash tag, so callers spread over a Redis Cluster instead of crowding one slot."""
    return f"{prefix()}:{{rl:{scope}:{caller}}}"


def wrong_codes(event_id: int, address: str) -> str:
    """Recent wrong access codes of one client address (its digest) for one event: the
    wrong-code budget (queueing/web/abuse.py). Under the event's hash tag, so that an event's
    keys stay together."""
    return f"{_event(event_id)}:wc:{address}"


def turn_mail_signups(event_id: int, address: str) -> str:
    """Recent "it's your turn" addresses left from one client address (its digest) for one
    event (queueing/line/turn_mail.py)."""
    return f"{_event(event_id)}:mail-signups:{address}"


def turn_mail_recipient(event_id: int, recipient: str) -> str:
    """Which place of one event an address (the SHA-256 of it, lower-cased) is kept for: one
    "it's your turn" mail per address and on-sale (queueing/line/turn_mail.py)."""
    return f"{_event(event_id)}:mail-to:{recipient}"


def place_links(event_id: int, entry_id: int) -> str:
    """Recent "Continue on your phone" links of one place (queueing/line/place_links.py)."""
    return f"{_event(event_id)}:links:{entry_id}"


def pow_used(challenge_id: str) -> str:
    """Set once a proof-of-work challenge was spent; expires with the challenge."""
    return f"{prefix()}:{{pow:{challenge_id}}}"


def login_failures(scope: str, caller: str) -> str:
    """Sorted set of recent failed (or still running) password logins of one caller: an
    account digest or an address bucket. Shares its hash tag with the caller's lock."""
    return f"{prefix()}:{{login:{scope}:{caller}}}:failures"


def login_lock(scope: str, caller: str) -> str:
    """The unix time until which one caller's password logins are refused (a lockout)."""
    return f"{prefix()}:{{login:{scope}:{caller}}}:lock"


def room_owner() -> str:
    """The database whose room holds this prefix: claimed by the first room to check it, so
    that a second room pointed at the same prefix is refused, not mixed in
    (queueing/checks.py)."""
    return f"{prefix()}:room-owner"


def room_counters() -> str:
    """Hash of the room's own counters for ``/metrics`` (queueing/hot/stats.py): ticks
    dispatched and dropped, index rebuilds and their durations' histogram. Written by the
    workers, read by every web process at scrape; a tag of its own on a cluster."""
    return f"{prefix()}:{{room}}:counters"
