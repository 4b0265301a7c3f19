"""Staff dashboard: the catalogue of on-sales, and one on-sale live with its controls."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard.catalogue import REFRESH_SECONDS, catalogue
from dashboard.event_figures import event_figures
from dashboard.preview import preview, preview_form
from events.catalogue import SEARCH_MAX_LENGTH
from events.models import Event, EventMode
from staff import services


def _event(slug: str) -> Event:
    event = Event.objects.filter(slug=slug).first()
    if event is None:
        raise Http404("No such on-sale")
    return event


def _actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


def staff_who_may_see_events(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed-in staff (else the sign-in page) who may see on-sales (``events.view_event``,
    or ``change_event``), else 403: the dashboard shows what the staff API and the admin show,
    to the same people."""

    @staff_member_required
    @wraps(view)
    def guarded(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        user = request.user
        # ``change_event`` implies seeing what one changes, as in the admin and the staff API.
        if not (user.has_perm("events.view_event") or user.has_perm("events.change_event")):
            raise PermissionDenied("Seeing on-sales needs 'view event'.")
        return view(request, *args, **kwargs)

    return guarded


@staff_who_may_see_events
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "dashboard/index.html",
        {
            "catalogue": catalogue(request.GET, now=timezone.now()),
            "search_max": SEARCH_MAX_LENGTH,
            "refresh_seconds": REFRESH_SECONDS,
        },
    )


@staff_who_may_see_events
@require_GET
def catalogue_figures(request: HttpRequest) -> JsonResponse:
    """The figures of the rows on one page of the catalogue (same ``tab``, ``q``, ``page``),
    for the page to refresh them in place."""
    page = catalogue(request.GET, now=timezone.now())
    return JsonResponse(
        {
            "counts": {tab.group.value: tab.count for tab in page.tabs},
            "rows": {
                row.event.slug: {
                    "state": row.state.value,
                    "mode": row.event.mode,
                    **row.figures.as_json(),
                }
                for row in page.rows
            },
        }
    )


@staff_who_may_see_events
@require_GET
def event_page(request: HttpRequest, slug: str) -> HttpResponse:
    event = _event(slug)
    return render(
        request,
        "dashboard/event.html",
        {
            "event": event,
            "figures": event_figures(event, now=timezone.now()),
            "modes": EventMode.choices,
        },
    )


@staff_who_may_see_events
@require_GET
def event_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """The line this on-sale's settings (or others to try) would make of an expected arrival
    curve, simulated on the room's admission rules: it writes nothing. For staff who may see
    the on-sale (``events.view_event``, or ``change_event``, which implies it)."""
    event = _event(slug)
    form = preview_form(event, request.GET)
    figures = preview(form) if form.is_valid() else None
    return render(
        request,
        "dashboard/preview.html",
        {"event": event, "form": form, "figures": figures},
        status=200 if figures is not None else 400,
    )


@staff_who_may_see_events
@require_GET
def event_stats(request: HttpRequest, slug: str) -> JsonResponse:
    return JsonResponse(event_figures(_event(slug), now=timezone.now()))


@staff_who_may_see_events
@require_POST
def event_message(request: HttpRequest, slug: str) -> HttpResponse:
    """Staff's word to the line: set (or, with ``clear``, take away) the message every waiting
    page shows; audited as a change and broadcast at once (staff/services.py)."""
    event = _event(slug)
    if not request.user.has_perm("events.change_event"):
        messages.error(request, "You may look, but not steer: you lack 'change event'.")
        return redirect("dashboard-event", slug=slug)
    text = "" if request.POST.get("clear") else request.POST.get("message", "").strip()
    try:
        services.event_update(
            event=event, actor=_actor(request), now=timezone.now(), changes={"message": text}
        )
    except ValidationError as refusal:
        messages.error(request, " ".join(refusal.message_dict.get("message", refusal.messages)))
        return redirect("dashboard-event", slug=slug)
    messages.success(
        request,
        f"{event.name}: the line now reads your message."
        if text
        else f"{event.name}: message cleared.",
    )
    return redirect("dashboard-event", slug=slug)


_SETTINGS = {"capacity": "capacity", "rate": "rate_per_minute"}
# Staff switch the on-sale's mode here too (docs/api.md, "Modes"); audited like any change.
_MODE = "mode"


@staff_who_may_see_events
@require_POST
def event_control(request: HttpRequest, slug: str) -> HttpResponse:
    """pause / resume / close, or set capacity or rate. Confirmed in the page; without
    JavaScript, a confirmation page comes first."""
    event = _event(slug)
    if not request.user.has_perm("events.change_event"):
        messages.error(request, "You may look, but not steer: you lack 'change event'.")
        return redirect("dashboard-event", slug=slug)
    action = request.POST.get("action", "")
    if action not in services.EVENT_CONTROLS and action not in _SETTINGS and action != _MODE:
        messages.error(request, "Unknown control.")
        return redirect("dashboard-event", slug=slug)
    if action == _MODE and request.POST.get("value", "") not in EventMode.values:
        messages.error(request, "Unknown mode.")
        return redirect("dashboard-event", slug=slug)
    if request.POST.get("confirmed") != "yes":
        return render(
            request,
            "dashboard/confirm.html",
            {"event": event, "action": action, "value": request.POST.get("value", "")},
        )
    now = timezone.now()
    if action in services.EVENT_CONTROLS:
        services.EVENT_CONTROLS[action](event=event, actor=_actor(request), now=now)
        messages.success(request, f"{event.name}: {action} done.")
        return redirect("dashboard-event", slug=slug)
    if action == _MODE:
        mode = EventMode(request.POST["value"])
        services.event_update(event=event, actor=_actor(request), now=now, changes={"mode": mode})
        messages.success(request, f"{event.name}: the mode is now {mode.label.lower()}.")
        return redirect("dashboard-event", slug=slug)
    try:
        value = int(request.POST.get("value", ""))
        if value < 0:
            raise ValueError
        services.event_update(
            event=event, actor=_actor(request), now=now, changes={_SETTINGS[action]: value}
        )
    except (ValueError, ValidationError):
        messages.error(request, "Give a whole number, 0 or more.")
        return redirect("dashboard-event", slug=slug)
    messages.success(request, f"{event.name}: {_SETTINGS[action]} is now {value}.")
    return redirect("dashboard-event", slug=slug)
