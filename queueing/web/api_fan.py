"""The fans' endpoints (docs/api.md, "Fans"): parse, call one service, shape the answer.

Plain Django views rather than DRF: these are the hot paths and need none of DRF's machinery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from events.models import Event, EventState
from queueing.line.answers import TicketAnswer, ticket_poll
from queueing.line.joining import JoinOutcome, JoinRequest, JoinResult, entry_join_many
from queueing.line.leaving import entry_leave
from queueing.line.reads import event_by_slug, event_public_view
from queueing.line.reentry import entry_reenter
from queueing.rules.errors import QueueError
from queueing.rules.gate import return_url_clean
from queueing.rules.ticket_codec import TicketRef, ticket_read
from queueing.web.abuse import join_rate_check, pow_challenge, pow_check, wrong_code_gate
from queueing.web.api_errors import api_exception_response, json_api, json_body, optional_str
from queueing.web.callers import (
    Identity,
    address_digest,
    identity_from_request,
    identity_remember,
    newcomers_batch,
)
from queueing.web.latency import JOIN_SECONDS, STATUS_SECONDS, observed
from queueing.web.request_ids import request_id_of


def _ticket_ref(ticket: str) -> TicketRef:
    return ticket_read(ticket)  # InvalidTicket: 400 invalid_ticket at the edge


def _ticket_payload(view: TicketAnswer) -> dict[str, Any]:
    return {
        "ticket": view.ticket,
        "event": view.event_slug,
        "status": view.status.value,
        "position": view.position,
        "eta": view.eta.as_dict() if view.eta else None,
        "queue_length": view.queue_length,
        # Placed between two checkpoints of the line's snapshot while the hot index could
        # not answer: near, not exact (docs/api.md).
        "approximate": view.approximate,
    }


def _ticket_response(payload: dict[str, Any], view: TicketAnswer, *, status: int) -> JsonResponse:
    response = JsonResponse(payload, status=status)
    response["X-Poll-After-Seconds"] = f"{view.poll_after_seconds:g}"
    response["Cache-Control"] = "no-store"
    return response


@dataclass(frozen=True)
class PreparedJoin:
    join: JoinRequest
    identity: Identity


def join_prepare(request: HttpRequest, event: Event) -> PreparedJoin:
    """Everything about a join that is read from the request, checked before it queues."""
    body = json_body(request)
    access_code = optional_str(body, "access_code", max_length=64)
    identity = identity_from_request(request, lanes=event.lanes, event_id=event.id)
    join_rate_check(request=request, identity=identity.digest)
    pow_check(event=event, proof=body.get("pow"))
    return PreparedJoin(
        join=JoinRequest(
            event=event,
            identity=identity.digest,
            access_code=access_code,
            now=timezone.now(),
            address=address_digest(request),
            # A link that is not one is dropped, never refused: a fan is not turned away
            # for it, and where it may lead is decided at admission (rules/return_urls.py).
            return_url=return_url_clean(body.get("return")),
            request_id=request_id_of(request),
        ),
        identity=identity,
    )


def join_response(request: HttpRequest, outcome: JoinOutcome, identity: Identity) -> HttpResponse:
    if not isinstance(outcome, JoinResult):
        return api_exception_response(request, outcome)
    view = outcome.answer
    # With the pass fields: a join the on-sale's mode lets in at once carries its pass.
    response = _ticket_response(
        ticket_status_payload(view), view, status=201 if outcome.created else 200
    )
    identity_remember(response, identity)
    return response


@observed(JOIN_SECONDS)
@json_api("POST")
def join(request: HttpRequest, slug: str) -> HttpResponse:
    prepared = join_prepare(request, event_by_slug(slug))
    (refusal,) = wrong_code_gate([prepared.join])
    if refusal is not None:
        raise refusal
    (outcome,) = entry_join_many([prepared.join])
    return join_response(request, outcome, prepared.identity)


def join_batch(requests: Sequence[tuple[HttpRequest, str]]) -> list[HttpResponse]:
    """The answers to many ``POST .../join`` (request, slug) at once, committed together
    (group commit; see queueing/line/joining.py). Used by the lean path in queueing/web/hot_paths.py
    from its batch thread; each request is checked exactly as ``join`` checks it."""
    events: dict[str, Event | QueueError] = {}
    answers: list[HttpResponse | PreparedJoin] = []
    with newcomers_batch():  # the batch's new fans in one lane: one part, one commit
        for request, slug in requests:
            answers.append(_prepared_or_refused(request, slug, events))
    _wrong_code_refusals(requests, answers)
    waiting = [
        (request, answer)
        for (request, _), answer in zip(requests, answers, strict=True)
        if isinstance(answer, PreparedJoin)
    ]
    outcomes = iter(entry_join_many([prepared.join for _, prepared in waiting]))
    return [
        join_response(request, next(outcomes), answer.identity)
        if isinstance(answer, PreparedJoin)
        else answer
        for (request, _), answer in zip(requests, answers, strict=True)
    ]


def _wrong_code_refusals(
    requests: Sequence[tuple[HttpRequest, str]], answers: list[HttpResponse | PreparedJoin]
) -> None:
    """Answer the batch's joins that the wrong-code budget refuses (in the batch's order)."""
    prepared = [
        (index, answer) for index, answer in enumerate(answers) if isinstance(answer, PreparedJoin)
    ]
    refusals: Sequence[Exception | None]
    try:
        refusals = wrong_code_gate([answer.join for _, answer in prepared])
    except Exception as failure:  # noqa: BLE001  PostgreSQL gone: the joins with a code fail
        refusals = [failure if answer.join.access_code else None for _, answer in prepared]
    for (index, _), refusal in zip(prepared, refusals, strict=True):
        if refusal is not None:
            answers[index] = api_exception_response(requests[index][0], refusal)


def ticket_status_payload(view: TicketAnswer) -> dict[str, Any]:
    issued = view.issued_pass
    return {
        **_ticket_payload(view),
        "pass": issued.token if issued else None,
        "pass_expires_at": issued.expires_at.isoformat() if issued else None,
        "redirect_url": issued.redirect_url if issued else None,
        "reentry_until": _iso(view.reentry_until),
        "message": view.message,
        # Sold out (docs/api.md, "Sold out"): the page says so, whatever the status.
        "sold_out_at": _iso(view.sold_out_at),
        "sold_out_message": view.sold_out_message,
    }


@observed(STATUS_SECONDS)
@json_api("GET", "DELETE")
def ticket(request: HttpRequest, ticket: str) -> HttpResponse:
    ref = _ticket_ref(ticket)
    now = timezone.now()
    if request.method == "DELETE":
        entry_leave(ref=ref, now=now)
        return HttpResponse(status=204)
    view = ticket_poll(ref=ref, ticket=ticket, now=now)
    return _ticket_response(ticket_status_payload(view), view, status=200)


@json_api("POST")
def reenter(request: HttpRequest, ticket: str) -> HttpResponse:
    """Back in line after a shop session that ended without completing (docs/api.md)."""
    view = entry_reenter(ref=_ticket_ref(ticket), now=timezone.now())
    return _ticket_response(ticket_status_payload(view), view, status=200)


@json_api("GET")
def challenge(request: HttpRequest, slug: str) -> HttpResponse:
    event = event_by_slug(slug)
    issued = pow_challenge(event)
    response = JsonResponse(
        {
            "challenge": issued.challenge,
            "difficulty": issued.difficulty,
            "expires_in": issued.expires_in,
            "algorithm": 'sha256(challenge + ":" + nonce) starts with `difficulty` zero bits',
        }
    )
    response["Cache-Control"] = "no-store"
    return response


@json_api("GET")
def event_detail(request: HttpRequest, slug: str) -> HttpResponse:
    return JsonResponse(event_public_payload(event_by_slug(slug), now=timezone.now()))


def event_public_payload(event: Event, *, now: datetime) -> dict[str, Any]:
    """The on-sale as anyone sees it (``GET /api/v1/events/{slug}``, and the answer to the
    shop's ``sold-out``)."""
    view = event_public_view(event, now=now)
    return {
        "slug": event.slug,
        "name": event.name,
        "state": view.state.value,
        "mode": event.mode,
        "queue_length": view.queue_length,
        "active": view.active,
        "capacity": event.capacity,
        "rate_per_minute": event.rate_per_minute,
        "eta_new": view.eta_new.as_dict() if view.eta_new else None,
        "prequeue_opens_at": _iso(event.prequeue_opens_at),
        "starts_at": _iso(event.starts_at),
        "ends_at": _iso(event.ends_at),
        "started_at": _iso(event.started_at),
        # The shuffle's commitment, then its reveal (see queueing/rules/shuffle.py).
        "queue_order": event.queue_order,
        "shuffle_seed_sha256": event.shuffle_seed_sha256,
        "shuffle_seed": event.shuffle_seed_revealed(closed=view.state == EventState.CLOSED),
        # A registration draw's commitment (queueing/line/draw.py); its seed is revealed by
        # the draw's own answer, with the result.
        "draw_seed_sha256": event.draw_seed_sha256,
        "message": event.message or None,
        "sold_out_at": _iso(event.sold_out_at),
        "sold_out_message": event.sold_out_message or None,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _prepared_or_refused(
    request: HttpRequest, slug: str, events: dict[str, Event | QueueError]
) -> HttpResponse | PreparedJoin:
    try:
        if slug not in events:
            try:
                events[slug] = event_by_slug(slug)
            except QueueError as missing:
                events[slug] = missing
        event = events[slug]
        if isinstance(event, QueueError):
            raise event
        return join_prepare(request, event)
    except Exception as failure:  # noqa: BLE001  this fan's answer, not the batch's
        return api_exception_response(request, failure)
