"""The draw (docs/api.md, "The draw"): at a registration window's close, the list of confirmed
registrations is frozen, its commitment published and the draw done with the on-sale's draw
seed (``Event.draw_seed``, its own: not the shuffle's, which must stay secret until the line
starts), revealed with the result, in one transaction. The rules are queueing/rules/draw.py.

When: the room's dispatch asks once a second, for the whole room, whether any window is due
or any invitation lapsed (``draw_work_due``: one query probing two partial indexes, of the
undrawn windows and of the unused invitations) and only then sends ``tasks.draws_run``.
Nothing is paid per on-sale or per fan while nobody is due.
A draw takes its window's row alone (``SKIP LOCKED``: a second run meanwhile skips it rather
than waiting), so registrations still committing finish first (they hold it shared) and none
commits into a list already frozen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from events.models import Event
from queueing.in_process import ProcessCache
from queueing.line.followups import draws_soon
from queueing.line.invitations import invitations_issue, invitations_lapse
from queueing.line.outcome_mails import registration_mails_ask
from queueing.models import (
    AuditAction,
    AuditRecord,
    Invitation,
    InvitationStatus,
    Registration,
    RegistrationStatus,
    RegistrationWindow,
)
from queueing.records.audit import audit_append
from queueing.rules.draw import WON, Listed, ProofStep, draw, list_leaf, list_order, list_root
from queueing.rules.errors import EventNotFound
from queueing.rules.merkle import merkle_levels, merkle_proof_from

logger = logging.getLogger(__name__)


_DUE_SQL = f"""
    SELECT EXISTS (SELECT 1 FROM {RegistrationWindow._meta.db_table}
                   WHERE drawn_at IS NULL AND closes_at <= %s)
        OR EXISTS (SELECT 1 FROM {Invitation._meta.db_table}
                   WHERE status = %s AND expires_at <= %s)
"""


def draw_work_due(now: datetime) -> bool:
    """A window closed and not drawn, or an invitation unused past its time: one query, each
    half read from a partial index that holds only what may become due."""
    with connection.cursor() as cursor:
        cursor.execute(_DUE_SQL, [now, InvitationStatus.SENT.value, now])
        return bool(cursor.fetchone()[0])


def draws_ask(now: datetime) -> bool:
    """The dispatch's question, asked for the whole room: a draw is sent for when one is due."""
    if not draw_work_due(now):
        return False
    try:
        draws_soon()
    except Exception:  # the broker is away: asked again at the next dispatch
        logger.warning("could not ask for the draws due", exc_info=True)
        return False
    return True


def draws_run(*, now: datetime) -> list[int]:
    """Every draw due, then every invitation lapsed (line/invitations.py): the ids of the
    on-sales drawn by this run."""
    due = RegistrationWindow.objects.filter(drawn_at__isnull=True, closes_at__lte=now)
    drawn = [
        event_id
        for event_id in due.values_list("event_id", flat=True)
        if registration_draw(event_id=event_id, now=now) is not None
    ]
    invitations_lapse(now=now)
    return drawn


@dataclass(frozen=True)
class DrawSummary:
    list_root: str
    count: int
    draw_seed: str
    tiers: dict[str, dict[str, int]]


def registration_draw(*, event_id: int, now: datetime) -> DrawSummary | None:
    """Freeze the window's list, publish its commitment and draw; None when it is not due, is
    drawn already, or another run holds it."""
    with transaction.atomic():
        window = (
            RegistrationWindow.objects.select_for_update(skip_locked=True)
            .filter(event_id=event_id, drawn_at__isnull=True, closes_at__lte=now)
            .first()
        )
        if window is None:
            return None
        event = Event.objects.only("draw_seed").get(pk=event_id)
        rows = list(
            Registration.objects.filter(event_id=event_id, status=RegistrationStatus.CONFIRMED)
            .values_list("id", "public_hash", "tier__name")
            .order_by("public_hash")
        )
        listed = [Listed(hash=public_hash, tier=tier) for _, public_hash, tier in rows]
        result = draw(event.draw_seed, listed, winners=window.winners, waitlist=window.waitlist)
        ids = {public_hash: registration_id for registration_id, public_hash, _ in rows}
        drawn = []
        for tier_draw in result.values():
            for index, public_hash in enumerate(tier_draw.order):
                drawn.append(
                    Registration(
                        id=ids[public_hash],
                        outcome=tier_draw.outcome(index + 1),
                        draw_rank=index + 1,
                    )
                )
        Registration.objects.bulk_update(drawn, ["outcome", "draw_rank"], batch_size=2000)
        winners = [r for r in drawn if r.outcome == WON]
        hashes = {registration_id: public_hash for public_hash, registration_id in ids.items()}
        for registration in winners:
            registration.public_hash = hashes[registration.id]
        root = list_root(listed)
        # Pending registrations are not in the draw and will be told nothing: their
        # addresses go now.
        Registration.objects.filter(event_id=event_id, status=RegistrationStatus.PENDING).exclude(
            email=""
        ).update(email="")
        window.drawn_at, window.list_root, window.list_count = now, root, len(listed)
        window.save(update_fields=["drawn_at", "list_root", "list_count"])
        tiers = {
            tier: {
                "registrations": len(tier_draw.order),
                "winners": len(tier_draw.winners),
                "waitlist": len(tier_draw.waitlist),
            }
            for tier, tier_draw in result.items()
        }
        audit_append(
            event_id=event_id,
            action=AuditAction.DRAWN,
            actor="system:draw",
            at=now,
            data={
                "list_root": root,
                "count": len(listed),
                "draw_seed": event.draw_seed,
                "winners": window.winners,
                "waitlist": window.waitlist,
                "tiers": tiers,
            },
        )
        invitations_issue(window=window, registrations=winners, now=now)
        registration_mails_ask(event_id)
    return DrawSummary(list_root=root, count=len(listed), draw_seed=event.draw_seed, tiers=tiers)


# ------------------------------------------------------------------ reads (write nothing)


def draw_window(event: Event) -> RegistrationWindow:
    window = RegistrationWindow.objects.filter(event=event).first()
    if window is None:
        raise EventNotFound("This on-sale takes no registrations.")
    return window


def draw_tiers(event_id: int) -> dict[str, dict[str, int]]:
    """Each tier's counts as the draw's own record holds them (one indexed read, not the
    list)."""
    record = AuditRecord.objects.filter(event_id=event_id, action=AuditAction.DRAWN).first()
    return dict(record.data["tiers"]) if record is not None else {}


def draw_listed_page(
    *, event: Event, after: str, limit: int
) -> list[tuple[str, str, str, int | None]]:
    """The drawn list in hash order after ``after``: (hash, tier, outcome, rank) each."""
    return list(
        Registration.objects.filter(
            event=event, status=RegistrationStatus.CONFIRMED, public_hash__gt=after
        )
        .exclude(outcome="")
        .order_by("public_hash")
        .values_list("public_hash", "tier__name", "outcome", "draw_rank")[:limit]
    )


@dataclass(frozen=True)
class Inclusion:
    registration: Registration
    tier: str
    proof: list[ProofStep]


@dataclass(frozen=True)
class _DrawnTree:
    levels: list[list[str]]
    index: dict[str, int]  # a registration's published hash -> its leaf's place


# A drawn list never changes: each process keeps the trees of a few, so that a proof costs a
# lookup and log n steps, not a read and a hash of the whole list per request.
_drawn_trees: ProcessCache[int, _DrawnTree] = ProcessCache("drawn trees", max_entries=8)


def _drawn_tree(event_id: int) -> _DrawnTree:
    fresh, tree = _drawn_trees.fresh(event_id)
    if fresh and tree is not None:
        return tree
    listed = list_order(
        Listed(hash=public_hash, tier=tier)
        for public_hash, tier in Registration.objects.filter(
            event_id=event_id, status=RegistrationStatus.CONFIRMED
        )
        .exclude(outcome="")
        .values_list("public_hash", "tier__name")
    )
    tree = _DrawnTree(
        levels=merkle_levels([list_leaf(item) for item in listed]),
        index={item.hash: place for place, item in enumerate(listed)},
    )
    return _drawn_trees.put(event_id, tree)


def registration_inclusion(*, registration: Registration) -> Inclusion | None:
    """A drawn registration's inclusion proof; None if it was not in the list (never
    confirmed)."""
    if not registration.outcome:
        return None
    tree = _drawn_tree(registration.event_id)
    place = tree.index.get(registration.public_hash)
    if place is None:
        return None
    proof = merkle_proof_from(tree.levels, place)
    return Inclusion(registration=registration, tier=registration.tier.name, proof=proof)
