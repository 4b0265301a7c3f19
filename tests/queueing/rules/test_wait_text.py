"""What the waiting page says of a wait (queueing/rules/wording.py): a range when the pace is
measured, and otherwise the one sentence that is true of the line's situation."""

import pytest
from django.utils import translation

from queueing.rules.eta import Eta
from queueing.rules.wording import (
    StatusKind,
    WaitKind,
    others_waiting_text,
    status_kind,
    status_text,
    wait_bound_text,
    wait_kind,
    wait_range_text,
    wait_text,
)

ETA = Eta(12 * 60, 15 * 60, 17 * 60)


@pytest.mark.parametrize(
    ("eta", "text"),
    [
        (Eta(5, 20, 50), "less than a minute"),
        (Eta(12 * 60 + 5, 15 * 60, 17 * 60 + 10), "about 12–18 minutes"),
        (Eta(10, 60, 100), "about 1–2 minutes"),
        (Eta(120, 120, 120), "about 2 minutes"),
        (Eta(3 * 3600, 4 * 3600, 5 * 3600), "about 3–5 hours"),
    ],
)
def test_waits_are_said_as_ranges(eta, text) -> None:
    with translation.override("en"):
        assert wait_range_text(eta) == text


def test_waits_are_translated() -> None:
    with translation.override("de"):
        assert wait_range_text(Eta(12 * 60, 15 * 60, 17 * 60 + 10)) == "etwa 12–18 Minuten"


@pytest.mark.parametrize(
    ("facts", "kind"),
    [
        # What stops the line comes before any figure...
        ({"status": "prequeue", "mode": "maintenance"}, WaitKind.PREQUEUE),
        ({"mode": "maintenance", "state": "paused", "eta": ETA}, WaitKind.MAINTENANCE),
        ({"state": "closed", "eta": ETA}, WaitKind.CLOSED),
        ({"state": "paused", "eta": ETA, "bound_seconds": 600.0}, WaitKind.PAUSED),
        # ... a figure before a bound ...
        ({"eta": ETA, "bound_seconds": 600.0}, WaitKind.ESTIMATE),
        ({"bound_seconds": 600.0}, WaitKind.BOUNDED),
        # ... and "still measuring" only when nothing is known: a line that has moved is
        # never told it has not.
        ({}, WaitKind.MEASURING),
        ({"mode": "safety_net"}, WaitKind.MEASURING),
    ],
)
def test_each_situation_has_its_own_kind(facts, kind) -> None:
    given = {
        "status": "waiting",
        "state": "open",
        "mode": "queue",
        "eta": None,
        "bound_seconds": None,
        **facts,
    }
    assert wait_kind(**given) == kind


def test_each_kind_says_something_of_its_own() -> None:
    with translation.override("en"):
        said = {kind: wait_text(kind, eta=ETA, bound_seconds=600.0) for kind in WaitKind}
    assert len(set(said.values())) == len(WaitKind)
    assert said[WaitKind.MAINTENANCE] == "On hold during maintenance."
    assert said[WaitKind.PAUSED] == "On hold while the sale is paused."
    assert said[WaitKind.ESTIMATE] == "about 12–17 minutes"
    assert said[WaitKind.BOUNDED].startswith("At most 10 minutes")
    assert not any("as soon as the line starts moving" in text for text in said.values())


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (30, "At most 1 minute (still measuring how fast the line moves)."),
        (61, "At most 2 minutes (still measuring how fast the line moves)."),
        (119 * 60, "At most 119 minutes (still measuring how fast the line moves)."),
        (119 * 60 + 1, "At most 2 hours (still measuring how fast the line moves)."),
        (7201, "At most 3 hours (still measuring how fast the line moves)."),
    ],
)
def test_a_bound_is_rounded_up_so_that_at_most_holds(seconds, text) -> None:
    with translation.override("en"):
        assert wait_bound_text(seconds) == text


def test_a_bound_follows_the_languages_plural_rule() -> None:
    with translation.override("pl"):
        two, five = wait_bound_text(2 * 60), wait_bound_text(5 * 60)
    assert "2" in two and "5" in five and two.replace("2", "5") != five


@pytest.mark.parametrize(
    ("facts", "kind"),
    [
        ({"status": "prequeue"}, StatusKind.PREQUEUE),
        ({"status": "prequeue", "mode": "maintenance"}, StatusKind.PREQUEUE_MAINTENANCE),
        ({"mode": "maintenance", "state": "paused", "position": 1}, StatusKind.MAINTENANCE),
        ({"state": "paused", "position": 1}, StatusKind.PAUSED),
        ({"position": 1}, StatusKind.NEXT),
        ({"position": 2}, StatusKind.IN_LINE),
    ],
)
def test_the_first_line_follows_the_line(facts, kind) -> None:
    given = {"status": "waiting", "state": "open", "mode": "queue", "position": 5, **facts}
    assert status_kind(**given) == kind


def test_maintenance_is_one_sentence_that_keeps_the_place() -> None:
    with translation.override("en"):
        said = status_text(StatusKind.MAINTENANCE)
    assert said == (
        "The shop is paused for maintenance. You keep your place and go in when it reopens."
    )
    assert "closed" not in said


@pytest.mark.parametrize(
    ("queue_length", "text"),
    [
        (0, "Nobody else is waiting yet."),
        (1, "Nobody else is waiting yet."),
        (2, "1 other person is waiting with you."),
        (3, "2 other people are waiting with you."),
        (12346, "12,345 other people are waiting with you."),
    ],
)
def test_the_pre_queue_counts_the_others_only(queue_length, text) -> None:
    with translation.override("en"):
        assert others_waiting_text(queue_length) == text


def test_the_others_are_counted_with_each_languages_plural_rule() -> None:
    with translation.override("pl"):
        assert others_waiting_text(3) != others_waiting_text(6)
        assert "2" in others_waiting_text(3)
    with translation.override("de"):
        assert others_waiting_text(1) == "Außer Ihnen wartet noch niemand."
