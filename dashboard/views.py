"""Staff dashboard: the catalogue of on-sales, and one on-sale live with its controls."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard.catalogue import REFRESH_SECONDS, catalogue
from dashboard.confirmations import confirmation
from dashboard.controls import (
    ADMIT_MAX,
    SETTING_MAX,
    Control,
    ControlRefused,
    control_asked,
    control_carry_out,
    controls_that_apply,
    why_it_does_not_apply,
)
from dashboard.draw_preview import draw_preview, draw_preview_form
from dashboard.event_figures import event_figures
from dashboard.preview import preview, preview_form
from dashboard.registration_panel import (
    WindowForm,
    WindowRefused,
    registration_summary,
    window_form,
    window_set_from_form,
)
from events.catalogue import SEARCH_MAX_LENGTH
from events.models import MESSAGE_MAX_LENGTH, Event, EventMode
from queueing.line.archives import archive_described
from staff.consequences import fans_now


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
    return _event_page(request, _event(slug))


def _event_page(
    request: HttpRequest, event: Event, *, window: WindowForm | None = None, status: int = 200
) -> HttpResponse:
    """The page, with the registration window's form as staff sent it when it was refused."""
    now = timezone.now()
    figures = event_figures(event, now=now)
    registration = registration_summary(event, now=now)
    if window is None:
        window = window_form(registration.window if registration else None, now=now)
    return render(
        request,
        "dashboard/event.html",
        {
            "registration": registration,
            "window_form": window,
            "time_zone": timezone.get_current_timezone_name(),
            "event": event,
            "archive": archive_described(event),
            "figures": figures,
            "modes": EventMode.choices,
            # Only what applies in this state (a closed on-sale: nothing to steer).
            "controls": {c.value for c in controls_that_apply(event, event.state_at(now))},
            "may_steer": request.user.has_perm("events.change_event"),
            "fans_page": reverse("waiting-page", kwargs={"slug": event.slug}),
            "admit_max": ADMIT_MAX,
            "setting_max": SETTING_MAX,
            "message_max": MESSAGE_MAX_LENGTH,
        },
        status=status,
    )


@staff_who_may_see_events
@require_POST
def event_registration(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the registration window (dashboard/registration_panel.py) for staff who may
    change the on-sale; a refused form comes back with its errors (400), nothing changed."""
    event = _event(slug)
    if not request.user.has_perm("events.change_event"):
        messages.error(request, "You may look, but not steer: you lack 'change event'.")
        return redirect("dashboard-event", slug=slug)
    form = WindowForm(request.POST)
    try:
        done = window_set_from_form(
            event=event, form=form, actor=_actor(request), now=timezone.now()
        )
    except WindowRefused:
        return _event_page(request, event, window=form, status=400)
    messages.success(request, done)
    return redirect(reverse("dashboard-event", kwargs={"slug": slug}) + "#registration")


@staff_who_may_see_events
@require_GET
def event_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """The line this on-sale's settings (or others to try) would make of an expected arrival
    curve, simulated on the room's admission rules: it writes nothing. For staff who may see
    the on-sale (``events.view_event``, or ``change_event``, which implies it)."""
    event = _event(slug)
    form = preview_form(event, request.GET)
    figures = preview(form) if form.is_valid() else None
    # A draw's outcome beside it (dashboard/draw_preview.py): its own fields, one query string.
    draw_form = draw_preview_form(event, request.GET)
    draw_figures = draw_preview(draw_form) if draw_form.is_valid() else None
    return render(
        request,
        "dashboard/preview.html",
        {
            "event": event,
            "form": form,
            "figures": figures,
            "draw_form": draw_form,
            "draw_figures": draw_figures,
        },
        status=200 if figures is not None and draw_figures is not None else 400,
    )


@staff_who_may_see_events
@require_GET
def event_stats(request: HttpRequest, slug: str) -> JsonResponse:
    return JsonResponse(event_figures(_event(slug), now=timezone.now()))


def _steer(request: HttpRequest, slug: str, post: QueryDict) -> HttpResponse:
    """Every control, the message's included: checked, refused when it does not apply in the
    on-sale's state, confirmed on a page of its own that says what it will do (in the numbers
    of that moment; no script needed), then done through the services (audited)."""
    event = _event(slug)
    back = redirect("dashboard-event", slug=slug)
    if not request.user.has_perm("events.change_event"):
        messages.error(request, "You may look, but not steer: you lack 'change event'.")
        return back
    now = timezone.now()
    try:
        asked = control_asked(post)
    except ControlRefused as refusal:
        messages.error(request, str(refusal))
        return back
    state = event.state_at(now)
    if asked.control not in controls_that_apply(event, state):
        messages.error(request, why_it_does_not_apply(event, state, asked.control))
        return back
    if post.get("confirmed") != "yes":
        fans = fans_now([event.pk])[event.pk]
        return render(
            request,
            "dashboard/confirm.html",
            {
                "event": event,
                "confirmation": confirmation(event, state, asked, fans),
                "fields": asked.fields(),
                "action_url": request.path,
            },
        )
    try:
        done = control_carry_out(event=event, asked=asked, actor=_actor(request), now=now)
    except ControlRefused as refusal:
        messages.error(request, str(refusal))
        return back
    messages.success(request, done)
    return back


@staff_who_may_see_events
@require_POST
def event_message(request: HttpRequest, slug: str) -> HttpResponse:
    """Staff's word to the line: set (or, with ``clear``, take away) the message every waiting
    page shows; confirmed first, audited as a change and broadcast at once (staff/services.py)."""
    post = request.POST.copy()
    post["action"] = Control.MESSAGE
    return _steer(request, slug, post)


@staff_who_may_see_events
@require_POST
def event_control(request: HttpRequest, slug: str) -> HttpResponse:
    """pause / resume / close, admit N now, capacity, pace (``rate``), mode or message
    (dashboard/controls.py). A confirmation page comes first."""
    return _steer(request, slug, request.POST)
