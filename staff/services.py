"""Creating and steering on-sales. Every change is audited in the same transaction.

Over 350 lines on purpose: every change staff make to an on-sale (create, edit, tiers, logo,
key, pause, resume, close, admit now) goes through here, each audited where it commits, and
what the trail keeps of it (never a secret).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError

from events.models import (
    LOGO_MAX_BYTES,
    AccessCode,
    Event,
    EventControl,
    EventLogo,
    Tier,
    new_integration_key,
)
from events.traffic_rules import TrafficRulesError, parse_traffic_rules, traffic_rules_json
from events.validation import is_well_formed_access_code, normalise_access_code
from queueing.line.admission import AdmissionOutcome, ManualAdmission, admission_run
from queueing.line.followups import broadcast_soon
from queueing.line.index_sync import index_mark_new_event_ready
from queueing.line.schedule import line_start
from queueing.models import AuditAction
from queueing.records.audit import audit_append, audit_chain_start, audit_lane_heads_ensure
from queueing.records.entry_reads import anyone_joined
from queueing.rules.branding import LogoRefused, logo_check
from queueing.rules.errors import EventArchived, LanesFixed, QueueOrderFixed
from queueing.webhooks.emitting import webhook_emit
from staff.queueit_settings import WRITE_ONLY_FIELDS, checked, write_only_audit

logger = logging.getLogger(__name__)

EDITABLE_FIELDS = (
    "name",
    "target_url",
    "capacity",
    "rate_per_minute",
    "session_seconds",
    "heartbeat_seconds",
    "away_seconds",
    "lanes",
    "queue_order",
    "max_queue_length",
    "max_wait_seconds",
    "prequeue_opens_at",
    "starts_at",
    "ends_at",
    "shuffle_at_start",
    "pow_difficulty",
    "max_live_per_address",
    "mode",
    "allowed_return_hosts",
    "reentry_seconds",
    "message",
    "accent_color",
    "intro_text",
    "next_steps_text",
    "traffic_rules",
    "queueit_customer_id",
    "queueit_event_id",
)
DEFAULT_TIER_NAME = "General"


@dataclass(frozen=True)
class TierSpec:
    name: str
    priority: int = 100
    share: int = 0
    access_codes: list[str] = field(default_factory=list)


def _audit_changed(*, event_id: int, actor: str, now: datetime, data: dict[str, Any]) -> None:
    """An ``event_changed`` record, in the caller's transaction; an archived on-sale has no
    chain to append it to, so its change is refused (and the caller's transaction undone)."""
    if Event.objects.filter(pk=event_id, archived_at__isnull=False).exists():
        raise EventArchived()
    audit_append(
        event_id=event_id, action=AuditAction.EVENT_CHANGED, actor=actor, at=now, data=data
    )


def _audit_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _audit_field(name: str, value: Any) -> Any:
    """What the trail keeps of a field's value: the value itself, but of traffic rules only
    how many and a digest, since header and cookie values may be bypass secrets."""
    if name == "traffic_rules":
        return traffic_rules_digest(value)
    return _audit_value(value)


def traffic_rules_digest(rules: list[dict[str, object]]) -> dict[str, Any]:
    """The rules' count and the SHA-256 of their canonical JSON, keys sorted, no spaces: an
    auditor holding the rules (the staff API shows them) can recompute it."""
    text = json.dumps(rules, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"rules": len(rules), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def traffic_rules_canonical(raw: object) -> list[dict[str, object]]:
    """Staff's rules in the canonical form kept and shown back, or the refusal with every
    message under ``traffic_rules`` (None: no rules)."""
    try:
        return traffic_rules_json(parse_traffic_rules(raw))
    except TrafficRulesError as refused:
        raise ValidationError(refused.fields()) from None


def _canonical(fields: dict[str, Any]) -> dict[str, Any]:
    if "traffic_rules" not in fields:
        return fields
    return {**fields, "traffic_rules": traffic_rules_canonical(fields["traffic_rules"])}


def _validate_tiers(specs: list[TierSpec]) -> list[TierSpec]:
    if not specs:
        raise ValidationError({"tiers": "An on-sale needs at least one tier."})
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValidationError({"tiers": "Tier names must be unique."})
    seen_codes: set[str] = set()
    normalised = []
    for spec in specs:
        codes = [normalise_access_code(code) for code in spec.access_codes]
        for code in codes:
            if not is_well_formed_access_code(code):
                raise ValidationError({"tiers": f"Access code {code!r} is not valid."})
            if code in seen_codes:
                raise ValidationError({"tiers": f"Access code {code!r} is used twice."})
            seen_codes.add(code)
        normalised.append(TierSpec(spec.name, spec.priority, spec.share, codes))
    return normalised


def _default_tier_name(specs: list[TierSpec]) -> str | None:
    """Fans without a code go to the first tier (in service order) that needs no code."""
    public = [spec for spec in specs if not spec.access_codes]
    return min(public, key=lambda spec: spec.priority).name if public else None


def _tiers_summary(specs: list[TierSpec]) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "priority": s.priority, "share": s.share, "codes": len(s.access_codes)}
        for s in specs
    ]


def _apply_tiers(event: Event, specs: list[TierSpec]) -> None:
    """Make the event's tiers match ``specs``, matching existing tiers by name."""
    default_name = _default_tier_name(specs)
    existing = {tier.name: tier for tier in Tier.objects.filter(event=event)}
    wanted = {spec.name for spec in specs}
    # Free the single-default slot before reassigning it.
    Tier.objects.filter(event=event, is_default=True).update(is_default=False)
    for name, tier in existing.items():
        if name not in wanted:
            try:
                tier.delete()
            except ProtectedError as exc:
                raise ValidationError(
                    {"tiers": f"Tier {name!r} has fans and cannot be removed."}
                ) from exc
    AccessCode.objects.filter(event=event).delete()
    for spec in specs:
        tier = existing.get(spec.name) or Tier(event=event, name=spec.name)
        tier.priority, tier.share = spec.priority, spec.share
        tier.is_default = spec.name == default_name
        tier.full_clean(exclude=["event"], validate_constraints=False)
        tier.save()
        AccessCode.objects.bulk_create(
            AccessCode(event=event, tier=tier, code=code) for code in spec.access_codes
        )


def _after_commit_mark_ready(event_id: int, *, lanes: int) -> None:
    transaction.on_commit(lambda: index_mark_new_event_ready(event_id, lanes=lanes))


# What the fans' pages show from the ticks: a change is broadcast at once, not at the next beat.
_SHOWN_LIVE = frozenset({"message", "mode"})


def after_commit_broadcast(event_id: int) -> None:
    """Once the transaction commits, a tick of the on-sale for its fans' pages (staff's word,
    the mode, a sell-out shown within a second rather than at the next beat)."""

    def send() -> None:
        try:
            broadcast_soon(event_id)
        except Exception:  # the broker is away: the next beat's tick carries the change
            logger.warning("could not ask for a tick of event %s", event_id, exc_info=True)

    transaction.on_commit(send)


def event_create(
    *,
    actor: str,
    slug: str,
    name: str,
    target_url: str,
    now: datetime,
    tiers: list[TierSpec] | None = None,
    **settings: Any,
) -> Event:
    unknown = set(settings) - set(EDITABLE_FIELDS) - set(WRITE_ONLY_FIELDS)
    if unknown:
        raise ValueError(f"unknown event fields: {sorted(unknown)}")
    specs = _validate_tiers(tiers or [TierSpec(name=DEFAULT_TIER_NAME)])
    settings = _canonical(settings)
    with transaction.atomic():
        event = Event(slug=slug, name=name, target_url=target_url, **settings)
        checked(event)
        event.save()
        _apply_tiers(event, specs)
        audit_chain_start(event_id=event.id, lanes=event.lanes)
        audit_append(
            event_id=event.id,
            action=AuditAction.EVENT_CREATED,
            actor=actor,
            at=now,
            data={
                "slug": slug,
                **{f: _audit_field(f, getattr(event, f)) for f in EDITABLE_FIELDS},
                **{f: "set" for f in WRITE_ONLY_FIELDS if getattr(event, f)},
                "tiers": _tiers_summary(specs),
                # The commitment to the pre-queue shuffle's seed, revealed after the shuffle.
                "shuffle_seed_sha256": event.shuffle_seed_sha256,
                # And to a registration draw's seed, revealed with the draw's result.
                "draw_seed_sha256": event.draw_seed_sha256,
            },
        )
        webhook_emit(event=event, type="onsale.created", now=now, data={"by": actor})
        # Nothing scheduled (or a start already past): the line starts with the on-sale, not
        # at the first tick, whose "shuffled" record (of nobody) is then this one.
        if line_start(event_id=event.id, now=now):
            event.refresh_from_db(fields=["started_at"])
        _after_commit_mark_ready(event.id, lanes=event.lanes)
    return event


def event_update(
    *,
    event: Event,
    actor: str,
    now: datetime,
    changes: dict[str, Any],
    tiers: list[TierSpec] | None = None,
) -> Event:
    unknown = set(changes) - set(EDITABLE_FIELDS) - set(WRITE_ONLY_FIELDS)
    if unknown:
        raise ValueError(f"unknown event fields: {sorted(unknown)}")
    specs = _validate_tiers(tiers) if tiers is not None else None
    changes = _canonical(changes)
    with transaction.atomic():
        locked = Event.objects.select_for_update(no_key=True).get(pk=event.pk)
        lanes_change = "lanes" in changes and changes["lanes"] != locked.lanes
        order_change = "queue_order" in changes and changes["queue_order"] != locked.queue_order
        if lanes_change or order_change:
            # Locked against joins too (it waits for those under way, which hold a key-share
            # lock: line/joining.py): none commits between the check and the change.
            locked = Event.objects.select_for_update().get(pk=event.pk)
            # Each fan's place key was drawn in the order of the moment they joined: a change
            # would reorder those already waiting (queueing/rules/shuffle.py). A line that
            # started with nobody in it (no ``starts_at``: it starts at creation) reorders
            # nobody, so the first join is the limit, as for the lanes.
            if order_change and anyone_joined(locked.pk):
                raise QueueOrderFixed()
            if lanes_change and anyone_joined(locked.pk):
                raise LanesFixed()
        diff = {}
        for name, value in changes.items():
            old = getattr(locked, name)
            if old != value:
                if name in WRITE_ONLY_FIELDS:
                    diff[name] = write_only_audit(old, value)
                else:
                    diff[name] = [_audit_field(name, old), _audit_field(name, value)]
                setattr(locked, name, value)
        checked(locked)
        locked.save()
        if lanes_change:  # each lane's chain head, before anyone can join it
            audit_lane_heads_ensure(event_id=locked.id, lanes=locked.lanes)
        if specs is not None:
            _apply_tiers(locked, specs)
            diff["tiers"] = _tiers_summary(specs)
        if diff:
            _audit_changed(event_id=locked.id, actor=actor, now=now, data={"changes": diff})
        if _SHOWN_LIVE & diff.keys():
            after_commit_broadcast(locked.id)
        if "mode" in diff:
            webhook_emit(
                event=locked,
                type="onsale.mode_changed",
                now=now,
                data={"from": diff["mode"][0], "to": diff["mode"][1], "by": actor},
            )
        if lanes_change:  # the new lanes' (empty) indexes are whole from the start
            _after_commit_mark_ready(locked.id, lanes=locked.lanes)
    return locked


def event_record_admin_change(*, event: Event, actor: str, now: datetime, what: str) -> None:
    """Audit a change made through the admin's inline forms (tiers, access codes)."""
    with transaction.atomic():
        _audit_changed(event_id=event.id, actor=actor, now=now, data={"changes": {"admin": what}})


def event_logo_change(*, event: Event, actor: str, now: datetime, image: bytes | None) -> Event:
    """Give the on-sale a logo (``image``: PNG, JPEG, GIF or WebP bytes), or take it away
    (None). The bytes and ``logo_sha256``, which names the logo's URL, change together.

    Audited as ``event_changed`` with the old and new digests, type and size: never the
    bytes, which the trail has no use for and auditors need not download."""
    content_type = ""
    if image is not None:
        try:
            content_type = logo_check(image, max_bytes=LOGO_MAX_BYTES)
        except LogoRefused as refusal:
            raise ValidationError({"logo": str(refusal)}) from refusal
    sha256 = hashlib.sha256(image).hexdigest() if image is not None else ""
    with transaction.atomic():
        locked = Event.objects.select_for_update(no_key=True).get(pk=event.pk)
        if locked.logo_sha256 == sha256:
            return locked
        if image is None:
            EventLogo.objects.filter(event=locked).delete()
        else:
            EventLogo.objects.update_or_create(
                event=locked, defaults={"content_type": content_type, "data": image}
            )
        data: dict[str, Any] = {
            "changes": {"logo_sha256": [locked.logo_sha256 or None, sha256 or None]}
        }
        if image is not None:
            data["logo"] = {"content_type": content_type, "bytes": len(image)}
        locked.logo_sha256 = sha256
        locked.save(update_fields=["logo_sha256", "updated_at"])
        _audit_changed(event_id=locked.id, actor=actor, now=now, data=data)
    return locked


def integration_key_rotate(*, event: Event, actor: str, now: datetime) -> Event:
    """Give the on-sale a new integration key; the old one stops working at once.

    The audit record says that the key was rotated, never the key: the trail is read by
    auditors who may not hold the shop's credentials."""
    with transaction.atomic():
        locked = Event.objects.select_for_update(no_key=True).get(pk=event.pk)
        locked.integration_key = new_integration_key()
        locked.save(update_fields=["integration_key", "updated_at"])
        _audit_changed(
            event_id=locked.id,
            actor=actor,
            now=now,
            data={"changes": {"integration_key": "rotated"}},
        )
    return locked


_CONTROL_CHANGES: dict[EventControl, tuple[tuple[EventControl, ...], AuditAction, str]] = {
    EventControl.PAUSED: ((EventControl.RUNNING,), AuditAction.EVENT_PAUSED, "onsale.paused"),
    EventControl.RUNNING: ((EventControl.PAUSED,), AuditAction.EVENT_RESUMED, "onsale.resumed"),
    EventControl.CLOSED: (
        (EventControl.RUNNING, EventControl.PAUSED),
        AuditAction.EVENT_CLOSED,
        "onsale.closed",
    ),
}


def _event_set_control(*, event: Event, to: EventControl, actor: str, now: datetime) -> Event:
    expected, action, webhook = _CONTROL_CHANGES[to]
    fields: dict[str, Any] = {"control": to}
    if to == EventControl.CLOSED:
        fields["closed_at"] = now
    with transaction.atomic():
        changed = Event.objects.filter(pk=event.pk, control__in=expected).update(**fields)
        if changed:
            audit_append(event_id=event.pk, action=action, actor=actor, at=now)
            # Told once: only the call whose compare-and-set changed the control.
            webhook_emit(
                event=Event.objects.get(pk=event.pk), type=webhook, now=now, data={"by": actor}
            )
    return Event.objects.get(pk=event.pk)


def event_pause(*, event: Event, actor: str, now: datetime) -> Event:
    return _event_set_control(event=event, to=EventControl.PAUSED, actor=actor, now=now)


def event_resume(*, event: Event, actor: str, now: datetime) -> Event:
    return _event_set_control(event=event, to=EventControl.RUNNING, actor=actor, now=now)


def event_close(*, event: Event, actor: str, now: datetime) -> Event:
    return _event_set_control(event=event, to=EventControl.CLOSED, actor=actor, now=now)


# Staff's controls by name: the staff API's URLs, the admin's actions and the dashboard's
# buttons all steer an on-sale through this one table.
EVENT_CONTROLS: dict[str, Callable[..., Event]] = {
    "pause": event_pause,
    "resume": event_resume,
    "close": event_close,
}


# The most fans one "admit N now" lets in: the admin's action, the dashboard's control and the
# staff API's admit-now alike.
ADMIT_NOW_MAX = 10_000


def event_admit_now(*, event: Event, count: int, actor: str, now: datetime) -> AdmissionOutcome:
    """Staff let ``count`` fans in at once: past the pace, never past the capacity. The
    admission run audits each admission as staff's (``actor``)."""
    return admission_run(
        event_id=event.pk, now=now, manual=ManualAdmission(count=count, actor=actor)
    )
