"""The admin's filter of on-sales by state: the dashboard's groups, in SQL (events/catalogue.py),
so a filtered list of a thousand on-sales is still one page of rows."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from events.catalogue import GROUP_STATES, Group, group_q, state_q
from events.models import Event

# Live is the group staff ask for most, and the one with more than one state in it: its
# states can be picked one by one too.
_LIVE_STATES = {state.value: state for state in GROUP_STATES[Group.LIVE]}


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        live = [(value, f"Live: {state.label.lower()}") for value, state in _LIVE_STATES.items()]
        return [
            (Group.LIVE.value, Group.LIVE.label),
            *live,
            (Group.UPCOMING.value, f"{Group.UPCOMING.label} (scheduled)"),
            (Group.ENDED.value, f"{Group.ENDED.label} (closed)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Event]) -> QuerySet[Event]:
        value, now = self.value(), timezone.now()
        if value in Group.values:
            return queryset.filter(group_q(Group(value), now))
        if value in _LIVE_STATES:
            return queryset.filter(state_q(_LIVE_STATES[value], now))
        return queryset


def state_label(event: Event) -> str:
    """The state column: one on-sale's state, decided in Python (a page of rows at most)."""
    return event.state_at(timezone.now()).label
