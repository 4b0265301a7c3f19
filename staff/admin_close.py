"""The admin's "Close" action, asked first as Django's delete is: a page that names each
on-sale selected and how many fans closing it sends home, then the close itself, through
the services (audited). Closing is final and empties the line, so it is never one click."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from events.models import Event, EventState
from staff import services
from staff.consequences import FansNow, fans_now


@dataclass(frozen=True)
class ClosingRow:
    event: Event
    already_closed: bool
    fans: FansNow


def close_events_confirmed(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Event], actor: str
) -> TemplateResponse | None:
    """The confirmation page; once confirmed (``post=yes``, as Django's delete), the close."""
    now = timezone.now()
    events = list(queryset)
    if request.POST.get("post") == "yes":
        for event in events:
            services.EVENT_CONTROLS["close"](event=event, actor=actor, now=now)
        modeladmin.message_user(request, f"Closed {len(events)} on-sale(s).", messages.SUCCESS)
        return None
    counts = fans_now([event.pk for event in events])
    rows = [
        ClosingRow(
            event=event,
            already_closed=event.state_at(now) == EventState.CLOSED,
            fans=counts[event.pk],
        )
        for event in events
    ]
    closing = [row for row in rows if not row.already_closed]
    context: dict[str, Any] = {
        **modeladmin.admin_site.each_context(request),
        "title": "Close on-sales: are you sure?",
        "opts": modeladmin.model._meta,
        "rows": rows,
        "sent_home": sum(row.fans.in_line for row in closing),
        "kept": sum(row.fans.in_shop for row in closing),
        "closing": len(closing),
        "queryset": queryset,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/events/event/close_confirmation.html", context)
