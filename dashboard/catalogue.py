"""The staff catalogue: every on-sale, by group (live, upcoming, ended), searched and paged.

What a page costs does not grow with the number of on-sales: the groups are counted in one
aggregate query, the page's rows are one query, and figures are read for those rows only
(dashboard/catalogue_figures.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.http import QueryDict

from dashboard.catalogue_figures import RowFigures, rows_figures
from events.catalogue import SEARCH_MAX_LENGTH, Group, group_counts, in_group, search
from events.models import Event, EventState

PER_PAGE = 25
# How often the page asks for its rows' figures again (catalogue.js); only while it is seen.
REFRESH_SECONDS = 5

# What the schedule column shows in each group: the time that matters to it.
WHEN_LABELS: dict[Group, str] = {
    Group.LIVE: "Admission from",
    Group.UPCOMING: "Queue opens",
    Group.ENDED: "Ended",
}


@dataclass(frozen=True)
class Tab:
    group: Group
    count: int
    current: bool

    @property
    def label(self) -> str:
        return self.group.label


@dataclass(frozen=True)
class Row:
    event: Event
    state: EventState
    when: datetime | None
    figures: RowFigures


@dataclass(frozen=True)
class Catalogue:
    group: Group
    search: str
    tabs: tuple[Tab, ...]
    page: Page
    rows: tuple[Row, ...]
    params: QueryDict  # the group and search, for links that keep them

    @property
    def when_label(self) -> str:
        return WHEN_LABELS[self.group]

    @property
    def total(self) -> int:
        """On-sales matching the search, in every group."""
        return sum(tab.count for tab in self.tabs)

    @property
    def others(self) -> tuple[Tab, ...]:
        """The other groups that hold a match, for an empty group to point at."""
        return tuple(tab for tab in self.tabs if tab.count and not tab.current)

    @property
    def page_links(self) -> list[int | None]:
        """Page numbers to link, None where a run of them is left out."""
        numbers = self.page.paginator.get_elided_page_range(
            self.page.number, on_each_side=2, on_ends=1
        )
        return [n if isinstance(n, int) else None for n in numbers]


def default_group(counts: dict[Group, int]) -> Group:
    """Live when fans are in any room, else what comes next; ended only when nothing else
    matches (a search for a past on-sale lands on it)."""
    if counts[Group.LIVE]:
        return Group.LIVE
    if counts[Group.UPCOMING] or not counts[Group.ENDED]:
        return Group.UPCOMING
    return Group.ENDED


def _when(event: Event, group: Group) -> datetime | None:
    if group == Group.UPCOMING:
        return event.prequeue_opens_at
    if group == Group.LIVE:
        return event.starts_at or event.created_at
    return event.ended_at  # annotated by in_group


def _params(group: Group, text: str) -> QueryDict:
    params = QueryDict(mutable=True)
    params["tab"] = group.value
    if text:
        params["q"] = text
    return params


def catalogue(query: QueryDict, *, now: datetime) -> Catalogue:
    """The page the request asks for (``tab``, ``q``, ``page``); anything unknown or out of
    range falls back to the default group or the nearest page."""
    text = query.get("q", "").strip()[:SEARCH_MAX_LENGTH]
    matching = search(Event.objects.all(), text)
    counts = group_counts(matching, now)
    asked = query.get("tab", "")
    group = Group(asked) if asked in Group.values else default_group(counts)
    page = Paginator(in_group(matching, group, now), PER_PAGE).get_page(query.get("page"))
    events = list(page.object_list)
    figures = rows_figures(events)
    return Catalogue(
        group=group,
        search=text,
        tabs=tuple(Tab(g, counts[g], g == group) for g in Group),
        page=page,
        rows=tuple(
            Row(event=e, state=e.state_at(now), when=_when(e, group), figures=figures[e.pk])
            for e in events
        ),
        params=_params(group, text),
    )
