"""The auditors' home: every on-sale they can audit, paged and searched, with the last verdict
on its audit chain (when it was made, how far it reached) and links to its report, its records
and their exports; "verify now" goes on checking one chain (dashboard/audit_verdicts.py).

For staff and auditors alike (dashboard/permissions.py). An auditor who signs in lands here
(dashboard/sign_in.py), and so does one who opens the dashboard's own address: the staff's
catalogue is not theirs to see.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import OuterRef, Subquery, Sum
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST, require_safe

from dashboard import views
from dashboard.audit_verdicts import verdict_check
from dashboard.models import AuditVerdict
from dashboard.permissions import is_auditor
from dashboard.report_views import staff_or_auditor_required
from events.catalogue import SEARCH_MAX_LENGTH, search
from events.models import Event, EventState
from queueing.models import AuditChainHead, AuditLaneHead

PER_PAGE = 25


@dataclass(frozen=True)
class AuditRow:
    event: Event
    state: EventState
    head_seq: int  # records in the trail now, over all its chains
    verdict: AuditVerdict | None

    @property
    def unchecked(self) -> int:
        """Records appended after the last check reached its end (or that it left for later)."""
        if self.verdict is None or not self.verdict.ok:
            return 0
        return max(self.head_seq - self.verdict.checked_records, 0)


def _verdict(event: Event) -> AuditVerdict | None:
    try:
        return event.audit_verdict
    except AuditVerdict.DoesNotExist:
        return None


def _head_seq(event: Event) -> int:
    """The root chain's head, plus the lanes' (``lane_records``, annotated by the page's
    query)."""
    lanes = getattr(event, "lane_records", 0) or 0
    try:
        return event.audit_head.seq + lanes
    except AuditChainHead.DoesNotExist:
        return lanes


def audit_rows(events: list[Event], now: datetime) -> list[AuditRow]:
    return [
        AuditRow(event=e, state=e.state_at(now), head_seq=_head_seq(e), verdict=_verdict(e))
        for e in events
    ]


def _page_links(page: Page) -> list[int | None]:
    numbers = page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)
    return [n if isinstance(n, int) else None for n in numbers]


@staff_or_auditor_required
@require_safe
def audit_home(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "").strip()[:SEARCH_MAX_LENGTH]
    # One query for the page's on-sales with their chain heads and verdicts: no chain is read.
    lanes = AuditLaneHead.objects.filter(event=OuterRef("pk")).order_by()
    events = (
        search(Event.objects.all(), text)
        .select_related("audit_head", "audit_verdict")
        .annotate(
            lane_records=Subquery(
                lanes.values("event").annotate(records=Sum("seq")).values("records")
            )
        )
        .order_by("-created_at", "-id")
    )
    page = Paginator(events, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/audit.html",
        {
            "page": page,
            "rows": audit_rows(list(page.object_list), timezone.now()),
            "page_links": _page_links(page),
            "search": text,
            "search_max": SEARCH_MAX_LENGTH,
            "params": QueryDict(urlencode({"q": text}) if text else ""),
            "verify_max": f"{settings.WR_AUDIT_VERIFY_MAX:,}",
        },
    )


def _said(verdict: AuditVerdict, head_records: int) -> str:
    if not verdict.ok:
        where = f"at seq {verdict.first_bad_seq}" if verdict.first_bad_seq else "at its end"
        problem = verdict.problem
        if verdict.first_bad_lane is not None:
            where = f"in lane {verdict.first_bad_lane} {where}"
            problem = problem.removeprefix(f"lane {verdict.first_bad_lane}: ")
        return f"broken {where}: {problem}."
    checked = verdict.checked_records
    if checked < head_records:
        upto = f"up to seq {checked}" if not verdict.lanes else f"in {checked} records"
        return f"intact {upto}; {head_records - checked} more to check: verify again to go on."
    return f"intact, all {checked} records."


@staff_or_auditor_required
@require_POST
def audit_verify(request: HttpRequest, slug: str) -> HttpResponse:
    """Go on checking one on-sale's chain from its last verdict (``from=start``: from seq 1),
    a stretch of at most ``WR_AUDIT_VERIFY_MAX`` records; back to the list where it was."""
    event = Event.objects.filter(slug=slug).first()
    if event is None:
        raise Http404("No such on-sale")
    back = {k: request.POST[k] for k in ("q", "page") if request.POST.get(k)}
    if event.archived_at is not None:
        # Its records left the room: the file is what is checked now, by anyone.
        messages.info(
            request,
            f"{event.name} is archived: its trail is in the archive file whose SHA-256 is "
            f"{(event.archive or {}).get('sha256', '')}; check that file with "
            "scripts/verify_trail.py.",
        )
        return redirect(reverse("dashboard-audit") + (f"?{urlencode(back)}" if back else ""))
    verdict, kept = verdict_check(
        event, now=timezone.now(), from_start=request.POST.get("from") == "start"
    )
    heads = verdict.root.head_seq + sum(lane.head_seq for lane in verdict.lanes.values())
    said = f"{event.name}: {_said(kept, heads)}"
    (messages.success if kept.ok else messages.error)(request, said)
    return redirect(reverse("dashboard-audit") + (f"?{urlencode(back)}" if back else ""))


def dashboard_landing(request: HttpRequest) -> HttpResponse:
    """``/dashboard/``: the staff's catalogue, but an auditor who is not staff is sent to their
    own page rather than to the admin's login, which would refuse them."""
    user = request.user
    if user.is_authenticated and not user.is_staff and is_auditor(user):
        return redirect("dashboard-audit")
    return views.index(request)
