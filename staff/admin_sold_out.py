"""The admin's "Mark sold out" action, asked first as "Close" is (staff/admin_close.py): a
page that names each on-sale selected, how many fans its line holds (sent home as sold out)
and how many are in the shop (they keep their passes), with a field for the word the fans
read under "Sold out"; then the sell-out itself (staff/sell_out.py, audited). Final, so
never one click."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from events.models import MESSAGE_MAX_LENGTH, Event, EventState
from queueing.rules.errors import QueueError
from staff.consequences import FansNow, fans_now
from staff.sell_out import event_sell_out


@dataclass(frozen=True)
class SellingOutRow:
    event: Event
    # Sold out already (nothing changes), or closed otherwise (refused: it did not sell out).
    already_sold_out: bool
    closed_otherwise: bool
    fans: FansNow


@admin.action(
    description="Mark sold out (close, pages say “Sold out”; asks first)",
    permissions=("change",),
)
def sell_out_events(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Event]
) -> TemplateResponse | None:
    """The action on the on-sales' list (staff/admin.py lists it with the others)."""
    actor = f"staff:{request.user.get_username()}"
    return sell_out_events_confirmed(modeladmin, request, queryset, actor)


def sell_out_events_confirmed(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Event], actor: str
) -> TemplateResponse | None:
    """The confirmation page; once confirmed (``post=yes``), each on-sale sold out."""
    now = timezone.now()
    events = list(queryset)
    message = request.POST.get("sold_out_message", "").strip()
    if request.POST.get("post") == "yes" and len(message) <= MESSAGE_MAX_LENGTH:
        done = 0
        for event in events:
            try:
                event_sell_out(event=event, message=message, actor=actor, now=now)
                done += 1
            except QueueError as refusal:
                modeladmin.message_user(request, f"{event.name}: {refusal.detail}", messages.ERROR)
        if done:
            modeladmin.message_user(
                request, f"Marked {done} on-sale(s) sold out.", messages.SUCCESS
            )
        return None
    counts = fans_now([event.pk for event in events])
    rows = [
        SellingOutRow(
            event=event,
            already_sold_out=event.sold_out_at is not None,
            closed_otherwise=event.sold_out_at is None and event.state_at(now) == EventState.CLOSED,
            fans=counts[event.pk],
        )
        for event in events
    ]
    selling = [row for row in rows if not row.already_sold_out and not row.closed_otherwise]
    context: dict[str, Any] = {
        **modeladmin.admin_site.each_context(request),
        "title": "Mark on-sales sold out: are you sure?",
        "opts": modeladmin.model._meta,
        "rows": rows,
        "sent_home": sum(row.fans.in_line for row in selling),
        "kept": sum(row.fans.in_shop for row in selling),
        "selling": len(selling),
        "message": message,
        "message_too_long": len(message) > MESSAGE_MAX_LENGTH,
        "message_max": MESSAGE_MAX_LENGTH,
        "queryset": queryset,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/events/event/sold_out_confirmation.html", context)
