"""An admitted fan's session in the shop: handing over its pass, the shop's side (verify and
complete), and whether it is still on, as the gate asks.

The gate's answer is the entry's state (its status, and which of its admissions is the
current one: a pass of a session that ended before a re-entry is not let in) as PostgreSQL
had it at most ``WR_GATE_STATE_SECONDS`` ago.

A pass's signature stays valid after the session ended (completed, abandoned, revoked,
expired), so the gate must ask the database; asking it on every request to a protected shop
would put PostgreSQL on the hottest path of all. Each web process remembers the state it
read per pass for ``WR_GATE_STATE_SECONDS`` (a bounded number of them), and the reads it
must make are batched: the tickets asked for while one read runs are read together by the
next, one query however many they are, and a ticket whose read is under way waits for it.
A state past half its time is still used, and read again in the background: a fan who
keeps browsing never waits for PostgreSQL (a request that must wait for a read is what made
the gate's p99 in the benchmark).

The bound: an answer is never older than the moment its read *started*, plus
``WR_GATE_STATE_SECONDS``. A session ended (its transaction committed) at time T is
therefore refused by every process from T + ``WR_GATE_STATE_SECONDS`` + the length of one
read at the latest.
"""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction

from events.models import Event
from queueing.in_process import PerEventLoop, closes_old_connections
from queueing.line.followups import admission_soon
from queueing.models import AuditAction, PassKey, QueueEntry
from queueing.passes.signing import (
    PassClaims,
    PassInvalid,
    pass_decode,
    pass_id_for,
    pass_issue,
)
from queueing.records.transitions import transition_audited
from queueing.rules.errors import InvalidInput, NotAuthorized
from queueing.rules.gate import PASS_QUERY_PARAMETER, admitted_destination
from queueing.rules.states import EntryStatus


@dataclass(frozen=True)
class IssuedPass:
    """What an admitted fan is handed: the pass, and where to take it."""

    token: str
    expires_at: datetime
    redirect_url: str


def with_pass(target_url: str, token: str) -> str:
    parts = urlsplit(target_url)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k != PASS_QUERY_PARAMETER
    ]
    query.append((PASS_QUERY_PARAMETER, token))
    return urlunsplit(parts._replace(query=urlencode(query)))


def entry_pass(
    entry: QueueEntry, *, event: Event, now: datetime, key: PassKey | None = None
) -> IssuedPass:
    """The admitted fan's pass; the first hand-over is recorded (it claims the slot).
    ``key``: the signing key, for callers handing over many passes at once."""
    assert entry.admitted_at is not None and entry.pass_expires_at is not None
    token = pass_issue(
        event_slug=event.slug,
        ticket_id=entry.public_id,
        tier=entry.tier.name,
        admitted_at=entry.admitted_at,
        expires_at=entry.pass_expires_at,
        now=now,
        key=key,
    )
    if entry.pass_issued_at is None:
        QueueEntry.objects.filter(pk=entry.pk, pass_issued_at__isnull=True).update(
            pass_issued_at=now
        )
    return IssuedPass(
        token=token,
        expires_at=entry.pass_expires_at,
        redirect_url=with_pass(
            admitted_destination(
                return_url=entry.return_url,
                target_url=event.target_url,
                allowed_hosts=event.allowed_return_hosts,
            ),
            token,
        ),
    )


@dataclass(frozen=True)
class PassVerdict:
    valid: bool
    reason: str | None = None
    event: str | None = None
    ticket_id: uuid.UUID | None = None
    expires_at: datetime | None = None


_ENDED_REASON = {
    EntryStatus.COMPLETED: "completed",
    EntryStatus.EXPIRED: "expired",
    EntryStatus.ABANDONED: "revoked",
    EntryStatus.REVOKED: "revoked",
}


def pass_verify(*, token: str, now: datetime, event_slug: str | None = None) -> PassVerdict:
    try:
        claims = pass_decode(token, now=now)
    except PassInvalid as invalid:
        return PassVerdict(valid=False, reason=invalid.reason)
    if event_slug is not None and claims.event_slug != event_slug:
        return PassVerdict(valid=False, reason="wrong_event", event=claims.event_slug)
    key = (claims.event_slug, claims.ticket_id)
    session = sessions_read([key])[key]
    if session is None or not session.lets_in(claims):
        reason = _ENDED_REASON.get(EntryStatus(session.status), "revoked") if session else "revoked"
        return PassVerdict(valid=False, reason=reason, event=claims.event_slug)
    return PassVerdict(
        valid=True,
        event=claims.event_slug,
        ticket_id=claims.ticket_id,
        expires_at=claims.expires_at,
    )


def _of_current_session(
    claims: PassClaims, reentered_at: datetime | None, admitted_at: datetime | None
) -> bool:
    """False for a pass of a session that ended before the fan went back in line: once they
    are admitted again, that old pass (still within its ``exp`` if the shop abandoned the
    session early) must not count as theirs, nor end the new session. Each admission's
    passes carry their own ``jti``."""
    if reentered_at is None:
        return True  # one session only: every pass of this entry is of it
    return admitted_at is not None and hmac.compare_digest(
        claims.pass_id, pass_id_for(claims.ticket_id, admitted_at)
    )


_OUTCOMES = {
    "completed": (EntryStatus.COMPLETED, AuditAction.COMPLETED),
    "abandoned": (EntryStatus.ABANDONED, AuditAction.ABANDONED),
}


def pass_complete(*, token: str, outcome: str, integration_key: str, now: datetime) -> bool:
    """The shop is done with a fan. True if this call ended the session (idempotent)."""
    if outcome not in _OUTCOMES:
        raise InvalidInput("outcome must be 'completed' or 'abandoned'.")
    try:
        # An expired pass may still be reported: the answer is the same, nothing changes.
        claims = pass_decode(token, now=now, verify_exp=False)
    except PassInvalid as invalid:
        raise InvalidInput(f"The pass is not valid ({invalid.reason}).") from invalid
    event = Event.objects.filter(slug=claims.event_slug).first()
    if event is None or not hmac.compare_digest(
        integration_key.encode(), event.integration_key.encode()
    ):
        raise NotAuthorized()
    entry = QueueEntry.objects.filter(public_id=claims.ticket_id, event=event).first()
    if entry is None or not _of_current_session(claims, entry.reentered_at, entry.admitted_at):
        return False
    new_status, action = _OUTCOMES[outcome]
    return session_end(
        event_id=event.id, entry_id=entry.id, to=new_status, action=action, actor="shop", now=now
    )


def session_end(
    *, event_id: int, entry_id: int, to: EntryStatus, action: AuditAction, actor: str, now: datetime
) -> bool:
    """Ends an admitted session (``to`` completed or abandoned), audited by ``actor``. True if
    this call ended it; a session already ended changes nothing."""
    with transaction.atomic():
        moved = transition_audited(
            event_id=event_id,
            ids=[entry_id],
            to=to,
            expected=(EntryStatus.ADMITTED,),
            now=now,
            action=action,
            actor=actor,
            data=lambda m: {},
        )
        if not moved:
            return False
        # The slot is free: admit the next fan now rather than at the next tick. Robust: if
        # the broker is down the completion still stands and the next tick admits.
        transaction.on_commit(lambda: admission_soon(event_id), robust=True)
    return True


# ---------------------------------------------------------- whether it is still on

SessionKey = tuple[str, uuid.UUID]  # the on-sale's slug, the ticket id (a pass's aud, sub)

# States remembered per process (about 350 bytes each).
REMEMBERED_MAX = 50_000
# Tickets read by one query at most.
READ_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class SessionState:
    """An entry as the gate and passes/verify judge its passes: its status, and which of its
    admissions is the current one."""

    status: str
    reentered_at: datetime | None
    admitted_at: datetime | None

    def lets_in(self, claims: PassClaims) -> bool:
        """Whether ``claims`` (a pass of this entry) is good now: the entry is admitted, and
        the pass is of this admission, not of one that ended before a re-entry."""
        return self.status == EntryStatus.ADMITTED and _of_current_session(
            claims, self.reentered_at, self.admitted_at
        )


def sessions_read(keys: Collection[SessionKey]) -> dict[SessionKey, SessionState | None]:
    """The entries' states now (None: no such entry for that on-sale), in one query."""
    found: dict[SessionKey, SessionState | None] = dict.fromkeys(keys)
    rows = QueueEntry.objects.filter(public_id__in={ticket for _, ticket in keys}).values_list(
        "public_id", "event__slug", "status", "reentered_at", "admitted_at"
    )
    for ticket_id, slug, status, reentered_at, admitted_at in rows:
        if (slug, ticket_id) in found:
            found[(slug, ticket_id)] = SessionState(status, reentered_at, admitted_at)
    return found


@closes_old_connections
def _read_in_thread(keys: list[SessionKey]) -> dict[SessionKey, SessionState | None]:
    return sessions_read(keys)


class SessionStates:
    """The remembered states and the reads under way, for one event loop (a future
    belongs to the loop that made it)."""

    def __init__(self) -> None:
        self._known: OrderedDict[SessionKey, tuple[float, SessionState | None]] = OrderedDict()
        # The next read's tickets, each with the future its requests wait on (None: read
        # in the background, nobody waits).
        self._waiting: dict[SessionKey, asyncio.Future[SessionState | None] | None] = {}
        self._reading: dict[
            SessionKey, asyncio.Future[SessionState | None] | None
        ] = {}  # under way
        self._reader: asyncio.Task[None] | None = None

    async def state(self, key: SessionKey) -> SessionState | None:
        """The state of the entry ``key`` names; raises DatabaseError when it had to be read
        and could not be."""
        known = self._known.get(key)
        if known is not None:
            age = time.monotonic() - known[0]
            if age < settings.WR_GATE_STATE_SECONDS:
                if age >= settings.WR_GATE_STATE_SECONDS / 2 and not self._asked(key):
                    self._ask(key, None)
                return known[1]
        future = self._reading.get(key) or self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._ask(key, future)
        # Shielded: a request that goes away must not cancel the answer others wait for.
        return await asyncio.shield(future)

    def _asked(self, key: SessionKey) -> bool:
        return key in self._waiting or key in self._reading

    def _ask(self, key: SessionKey, future: asyncio.Future[SessionState | None] | None) -> None:
        self._waiting[key] = future
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read_all())

    async def _read_all(self) -> None:
        try:
            while self._waiting:
                keys = list(self._waiting)[:READ_BATCH]
                self._reading = {key: self._waiting.pop(key) for key in keys}
                started = time.monotonic()
                try:
                    found = await sync_to_async(_read_in_thread)(keys)
                except Exception as exc:  # noqa: BLE001  (every waiter gets it)
                    for future in self._reading.values():
                        if future is not None and not future.done():
                            future.set_exception(exc)
                    continue
                finally:
                    reading, self._reading = self._reading, {}
                for key, state in found.items():
                    self._remember(key, started, state)
                    future = reading[key]
                    if future is not None and not future.done():
                        future.set_result(state)
        finally:
            self._reader = None

    def _remember(self, key: SessionKey, read_at: float, state: SessionState | None) -> None:
        self._known[key] = (read_at, state)
        self._known.move_to_end(key)
        while len(self._known) > REMEMBERED_MAX:
            self._known.popitem(last=False)


_per_loop = PerEventLoop(SessionStates)


async def session_state(key: SessionKey) -> SessionState | None:
    """``SessionStates.state`` of the running loop's states."""
    return await _per_loop.get().state(key)
