"""Each web process's own figures for /metrics (queueing/web/edge_figures.py)."""

from __future__ import annotations

import pytest

from queueing.web import edge_figures
from queueing.web.latency import REGISTRY


class _Queue:
    def __init__(self, depth: int) -> None:
        self._depth = depth

    def depth(self) -> int:
        return self._depth


def test_the_join_queues_depth_is_sampled_not_set_at_every_join(db) -> None:
    # (db: reading the registry runs the room's collectors too, which read PostgreSQL.)
    queues = [_Queue(3), _Queue(4)]
    for queue in queues:
        edge_figures.join_queue_watch(queue)
    edge_figures.process_sample()
    assert REGISTRY.get_sample_value("waitingroom_join_queue_depth") >= 7
    del queues, queue  # a queue gone is no longer counted (the app that held it is gone)
    edge_figures.process_sample()
    assert REGISTRY.get_sample_value("waitingroom_join_queue_depth") < 7


@pytest.mark.parametrize(
    ("status", "body", "content_type", "reason"),
    [
        (429, b'{"error": "queue_full", "detail": "Full."}', "application/json", "queue_full"),
        (503, b'{"error": "unavailable", "detail": "Busy."}', "application/json", "unavailable"),
        (429, b"<html>Too many attempts</html>", "text/html; charset=utf-8", "page"),
        (503, b"not json", "application/json", "error"),
    ],
)
def test_refusals_are_counted_by_their_code(db, status, body, content_type, reason) -> None:
    labels = {"status": str(status), "reason": reason}
    before = REGISTRY.get_sample_value("waitingroom_refusals_total", labels) or 0
    edge_figures.refusal_counted(status, body, content_type)
    assert REGISTRY.get_sample_value("waitingroom_refusals_total", labels) == before + 1
