"""An on-sale's traffic rules as the gate holds them (queueing/line/gate_rules.py): read and
compiled once, kept for WR_TRAFFIC_RULES_SECONDS, read again after; unknown and impossible
slugs cost at most one read, a NUL none."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from events.models import Event
from events.traffic_rules import TrafficAction
from queueing.line.gate_rules import NO_SUCH_EVENT, gate_rules

pytestmark = pytest.mark.django_db


def test_rules_are_read_once_within_the_bound_and_again_after_it(make_event, settings) -> None:
    settings.WR_TRAFFIC_RULES_SECONDS = 0.3
    make_event(slug="sale", traffic_rules=[{"action": "block", "path": ["/a"]}])
    with CaptureQueriesContext(connection) as queries:
        held = gate_rules("sale")
        assert gate_rules("sale") is held
    assert len(queries) == 1
    assert held.exists and [rule.action for rule in held.rules] == [TrafficAction.BLOCK]

    Event.objects.filter(slug="sale").update(traffic_rules=[])
    assert gate_rules("sale") is held  # within the bound: as read
    time.sleep(0.35)
    assert gate_rules("sale").rules == ()


def test_unknown_slugs_have_no_rules_and_a_nul_is_never_asked_about() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert gate_rules("nobody") == NO_SUCH_EVENT
        assert gate_rules("nobody") == NO_SUCH_EVENT
        assert gate_rules("bad\x00slug") == NO_SUCH_EVENT
    assert len(queries) == 1
