"""An on-sale's traffic rules for a gate that runs outside the room (the Django gate package,
integrations/django_gate): ``GET /api/v1/events/{slug}/traffic-rules`` with the on-sale's
integration key, because a header or cookie value in a rule may be a bypass secret.

The gate refetches the rules every few seconds per shop process, so the answer has a
``version`` (a digest of the canonical rules) that is also its ETag: an unchanged list costs a
``304`` and no body, however long it is."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

from django.http import HttpRequest, HttpResponse, JsonResponse

from events.models import Event
from events.traffic_rules import TrafficRulesError, parse_traffic_rules, traffic_rules_json
from queueing.web.api_errors import ApiError, json_api
from queueing.web.callers import bearer_key

logger = logging.getLogger(__name__)

# How long a gate may reuse the rules (its own RULES_CACHE_SECONDS is at most this in spirit:
# a staff change applies within it). Private: the answer holds secrets for this shop only.
RULES_MAX_AGE_SECONDS = 10


def _unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "Send the on-sale's integration key as a Bearer token.")


def rules_version(rules: list[dict[str, object]]) -> str:
    """A digest of the canonical rules: equal lists have equal versions."""
    canonical = json.dumps(rules, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@json_api("GET")
def traffic_rules(request: HttpRequest, slug: str) -> HttpResponse:
    key = bearer_key(request)
    found = Event.objects.filter(slug=slug).values("integration_key", "traffic_rules").first()
    if found is None:
        raise ApiError(404, "event_not_found", "No on-sale with that slug.")
    if not hmac.compare_digest(key.encode(), found["integration_key"].encode()):
        raise _unauthorized()
    try:
        rules = traffic_rules_json(parse_traffic_rules(found["traffic_rules"]))
    except TrafficRulesError as error:
        # Model validation keeps this out; a row written around it must not open the shop
        # to a guess: the gate keeps the rules it had.
        logger.error("stored traffic rules of %r do not parse: %s", slug, error)
        raise ApiError(
            503,
            "unavailable",
            "The on-sale's traffic rules cannot be read.",
            headers={"Retry-After": str(RULES_MAX_AGE_SECONDS)},
        ) from error
    version = rules_version(rules)
    etag = f'"{version}"'
    response: HttpResponse
    if etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        response = HttpResponse(status=304)
    else:
        response = JsonResponse({"traffic_rules": rules, "version": version})
    response["ETag"] = etag
    response["Cache-Control"] = f"private, max-age={RULES_MAX_AGE_SECONDS}"
    # The key decides what is answered: no shared cache may keep it for another caller.
    response["Vary"] = "Authorization"
    return response
