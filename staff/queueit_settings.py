"""An on-sale's Queue-it settings as staff change them (docs/queueit.md): the secret key is
write-only (the trail says only that it was set, changed or cleared), and the pair (customer
id, effective event id) must name one on-sale and fit the token's grammar. The services
(staff/services.py) check an on-sale with ``checked`` before saving it."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db.models import CharField, Value
from django.db.models.functions import Coalesce, Lower, NullIf

from events.models import Event

# Set, never shown: no answer, form or audit record carries the value, only that it changed.
WRITE_ONLY_FIELDS = ("queueit_secret_key",)

PAIR_TAKEN = (
    "Another on-sale of this Queue-it customer id already has this Queue-it event id (the "
    "slug in lower case when none is given)."
)
SLUG_NOT_AN_EVENT_ID = "The slug has '_', which a Queue-it event id cannot: give one."


def write_only_audit(old: str, new: str) -> str:
    """What the trail says of a write-only field's change: never the value."""
    if not new:
        return "cleared"
    return "set" if not old else "changed"


def _pair_taken(event: Event) -> bool:
    """Another on-sale with this (customer id, effective event id). Asked here as well as by
    the constraint: Django's own check of the constraint misses the slug default (NULLIF)."""
    if not event.queueit_customer_id:
        return False
    effective = Coalesce(
        NullIf("queueit_event_id", Value("")), Lower("slug"), output_field=CharField()
    )
    return (
        Event.objects.annotate(effective_queueit_id=effective)
        .filter(
            queueit_customer_id=event.queueit_customer_id,
            effective_queueit_id=event.queueit_event_id_effective,
        )
        .exclude(pk=event.pk)
        .exists()
    )


def checked(event: Event) -> None:
    """The model's checks (``full_clean``), with the Queue-it pair's told on its field."""
    if event.queueit_customer_id and "_" in event.queueit_event_id_effective:
        # The token's grammar splits fields on "_": the connector would drop the event id.
        raise ValidationError({"queueit_event_id": [SLUG_NOT_AN_EVENT_ID]})
    if _pair_taken(event):
        raise ValidationError({"queueit_event_id": [PAIR_TAKEN]})
    try:
        event.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict if hasattr(exc, "error_dict") else {}
        shared = errors.get(NON_FIELD_ERRORS, [])
        clash = [m for m in shared if "Queue-it event id" in m]
        if not clash:
            raise
        fields = {k: v for k, v in errors.items() if k != NON_FIELD_ERRORS}
        fields["queueit_event_id"] = [*fields.get("queueit_event_id", []), *clash]
        if rest := [m for m in shared if m not in clash]:
            fields[NON_FIELD_ERRORS] = rest
        raise ValidationError(fields) from exc
