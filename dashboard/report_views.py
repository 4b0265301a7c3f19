"""The report after the sale: its page (screen and print layouts) and its CSV.

For staff and for members of the auditors group, the same rule as the auditors' API
(dashboard/permissions.py): anyone else signed in is refused (403); someone not signed in is
sent to the dashboard's sign-in (dashboard/sign_in.py), which auditors who are not staff
can use too.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe

from dashboard.permissions import is_auditor
from dashboard.report_csv import report_csv
from dashboard.sale_report import sale_report
from events.models import Event
from queueing.line.archives import archive_described

View = Callable[..., HttpResponse]


def staff_or_auditor_required(view: View) -> View:
    @wraps(view)
    def guarded(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("dashboard-sign-in"))
        if not is_auditor(request.user):
            raise PermissionDenied("Only staff and auditors may read the report.")
        return view(request, *args, **kwargs)

    return guarded


def _event(slug: str) -> Event:
    event = Event.objects.filter(slug=slug).first()
    if event is None:
        raise Http404("No such on-sale")
    return event


def archived_page(request: HttpRequest, event: Event) -> HttpResponse:
    """410, saying when the on-sale was archived and what vouches for the file (its digest
    and last head), rather than a report of nothing."""
    return render(
        request,
        "dashboard/archived.html",
        {"event": event, "archive": archive_described(event)},
        status=410,
    )


@staff_or_auditor_required
@require_safe
def report_page(request: HttpRequest, slug: str) -> HttpResponse:
    """``?print=1`` is the printable layout: the same figures without the dashboard's
    navigation, laid out for A4, so printing needs no script."""
    event = _event(slug)
    if event.archived_at is not None:
        return archived_page(request, event)
    return render(
        request,
        "dashboard/report.html",
        {
            "report": sale_report(event, now=timezone.now()),
            "print_layout": request.GET.get("print") == "1",
        },
    )


@staff_or_auditor_required
@require_safe
def report_download(request: HttpRequest, slug: str) -> HttpResponse:
    event = _event(slug)
    if event.archived_at is not None:
        return archived_page(request, event)
    report = sale_report(event, now=timezone.now())
    stamp = report.generated_at.strftime("%Y%m%d-%H%M%S")
    response = HttpResponse(report_csv(report), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="report-{event.slug}-{stamp}.csv"'
    return response
