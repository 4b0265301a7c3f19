"""The re-entry rule on its own (queueing/rules/states.py): pure, no database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from queueing.rules.states import (
    EntryStatus,
    ReentryFacts,
    front_order_key,
    reentry_refusal,
    reentry_until,
)

ENDED = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
FACTS = ReentryFacts(
    status=EntryStatus.EXPIRED,
    was_admitted=True,
    ended_at=ENDED,
    reentered_at=None,
    reentry_seconds=300,
    event_closed=False,
    event_in_maintenance=False,
)


def test_the_window_runs_from_the_end_of_the_session_and_excludes_its_last_instant() -> None:
    assert reentry_until(FACTS, now=ENDED) == ENDED + timedelta(seconds=300)
    last = ENDED + timedelta(seconds=300)
    assert reentry_refusal(FACTS, now=last - timedelta(microseconds=1)) is None
    assert reentry_until(FACTS, now=last) is None
    assert "passed" in (reentry_refusal(FACTS, now=last) or "")


def test_an_abandoned_session_may_come_back_too() -> None:
    assert reentry_refusal(replace(FACTS, status=EntryStatus.ABANDONED), now=ENDED) is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"status": EntryStatus.COMPLETED}, "completed"),
        ({"status": EntryStatus.WAITING}, "still in line"),
        ({"status": EntryStatus.ADMITTED}, "still in line"),
        ({"status": EntryStatus.LEFT, "was_admitted": False}, "Only a fan"),
        ({"status": EntryStatus.REVOKED}, "Only a fan"),
        ({"was_admitted": False}, "Only a fan"),  # expired while waiting
        ({"reentered_at": ENDED}, "already"),
        ({"reentry_seconds": 0}, "does not let"),
        ({"event_closed": True}, "ended"),
        ({"event_in_maintenance": True}, "maintenance"),
        ({"ended_at": None}, "passed"),
    ],
)
def test_every_refusal_says_why(change: dict[str, object], words: str) -> None:
    facts = replace(FACTS, **change)  # type: ignore[arg-type]
    assert words in (reentry_refusal(facts, now=ENDED) or "")
    assert reentry_until(facts, now=ENDED) is None


@pytest.mark.parametrize(
    ("own", "smallest", "key"),
    [
        (10, None, 10),  # nobody waits in the tier: back where they were
        (10, 11, 10),  # still ahead of everyone waiting
        (10, 10, 9),  # (cannot tie: one below)
        (50, 11, 10),  # others waited ahead of the key: one below the smallest
        (50, 1, 0),  # and below, whatever the sign
        (50, 0, -1),
    ],
)
def test_the_returning_fan_takes_the_front_of_the_tier(
    own: int, smallest: int | None, key: int
) -> None:
    assert front_order_key(own, smallest) == key
