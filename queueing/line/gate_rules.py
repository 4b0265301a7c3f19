"""An on-sale's traffic rules as the gate applies them: compiled once per process, and read
from PostgreSQL again at most once per ``WR_TRAFFIC_RULES_SECONDS``.

The gate's check is asked on every request to a protected shop; reading the rules there would
put PostgreSQL on the hottest path of all, and compiling them (globs, networks) on every
request would cost more than deciding with them. Each process keeps, per on-sale slug, the
rules it read (already compiled: ``events.traffic_rules.parse_traffic_rules``) and whether
the on-sale exists. A kept list past half its time is still used, and read again in the
background, so that a shop's busy gate never waits for PostgreSQL; past its time, the request
waits for the read (one read per slug however many requests wait).

The bound: rules are never older than the moment their read *started*, plus
``WR_TRAFFIC_RULES_SECONDS``. A change staff save at time T is applied by every process from
T + ``WR_TRAFFIC_RULES_SECONDS`` + the length of one read at the latest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings

from events.models import Event
from events.traffic_rules import TrafficRule, TrafficRulesError, parse_traffic_rules
from events.validation import SLUG_RE
from queueing.in_process import PerEventLoop, ProcessCache, closes_old_connections

logger = logging.getLogger(__name__)

# Slugs remembered per process: one per protected on-sale, and the unknown ones asked about.
REMEMBERED_MAX = 10_000


@dataclass(frozen=True, slots=True)
class GateRules:
    """What the gate needs of an on-sale before it looks at passes."""

    exists: bool  # False: no such on-sale (no rules; the gate refuses every pass anyway)
    rules: tuple[TrafficRule, ...]


NO_SUCH_EVENT = GateRules(exists=False, rules=())

_held: ProcessCache[str, GateRules] = ProcessCache("gate traffic rules", max_entries=REMEMBERED_MAX)


def gate_rules_read(slug: str) -> GateRules:
    """The on-sale's rules now, from PostgreSQL (the slug is checked first: PostgreSQL
    refuses NUL). Rules that no longer parse (written around the model's validation) are
    logged and left out: every fan queues, the safe side."""
    if not SLUG_RE.match(slug):
        return NO_SUCH_EVENT
    found = Event.objects.filter(slug=slug).values_list("traffic_rules", flat=True)[:1]
    if not found:
        return NO_SUCH_EVENT
    try:
        rules = parse_traffic_rules(found[0])
    except TrafficRulesError as refused:
        logger.error("on-sale %s: stored traffic rules refused, not applied: %s", slug, refused)
        rules = ()
    return GateRules(exists=True, rules=rules)


def _kept(slug: str) -> tuple[GateRules | None, bool]:
    """The rules kept for ``slug`` if still within the bound, and whether to read them again
    in the background (past half their time)."""
    found = _held.kept(slug)
    if found is None:
        return None, False
    rules, age = found
    seconds = settings.WR_TRAFFIC_RULES_SECONDS
    if age >= seconds:
        return None, False
    return rules, age >= seconds / 2


def _read_and_keep(slug: str) -> GateRules:
    started = time.monotonic()
    return _held.put(slug, gate_rules_read(slug), kept_at=started)


@closes_old_connections
def _read_in_thread(slug: str) -> GateRules:
    return _read_and_keep(slug)


def gate_rules(slug: str) -> GateRules:
    """The rules for synchronous code (the gate's Django view): kept ones within the bound,
    else read now. Raises DatabaseError when they must be read and cannot be."""
    rules, _ = _kept(slug)
    return rules if rules is not None else _read_and_keep(slug)


class _Reads:
    """The reads under way on one event loop (a task belongs to the loop that made it)."""

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[GateRules]] = {}

    def start(self, slug: str) -> asyncio.Task[GateRules]:
        task = self.tasks.get(slug)
        if task is None:
            task = asyncio.get_running_loop().create_task(sync_to_async(_read_in_thread)(slug))
            self.tasks[slug] = task
            task.add_done_callback(lambda done: self._done(slug, done))
        return task

    def _done(self, slug: str, task: asyncio.Task[GateRules]) -> None:
        if self.tasks.get(slug) is task:
            del self.tasks[slug]
        if not task.cancelled() and task.exception() is not None:
            # Seen here for a background read nobody waits for; a waiting request gets it too.
            logger.warning("on-sale %s: traffic rules not read: %s", slug, task.exception())


_reads = PerEventLoop(_Reads)


async def gate_rules_async(slug: str) -> GateRules:
    """``gate_rules`` from the event loop, the read in a thread. Raises DatabaseError when
    they must be read and cannot be."""
    rules, refresh = _kept(slug)
    if rules is not None:
        if refresh:
            _reads.get().start(slug)
        return rules
    # Shielded: a request that goes away must not cancel the read others wait for.
    return await asyncio.shield(_reads.get().start(slug))
