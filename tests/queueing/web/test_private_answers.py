"""No cache keeps an answer that carries a ticket or a pass, or that shows one browser's place
(queueing/web/middleware.py ``kept_out_of_caches``, rules/gate.py): the fan's whole journey
through the pages, place links, the shop's redirect, re-entry and the gate, each answer
``Cache-Control: private, no-store`` with ``Vary: Cookie``."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from staff.services import event_close
from tests.helpers import new_fan, shop_completes

pytestmark = pytest.mark.django_db


def kept_out_of_caches(response: HttpResponse) -> bool:
    directives = {d.strip() for d in response.get("Cache-Control", "").split(",")}
    varies = {v.strip().lower() for v in response.get("Vary", "").split(",")}
    return {"private", "no-store"} <= directives and "cookie" in varies


def test_every_answer_that_carries_a_ticket_or_a_pass_is_kept_out_of_caches(make_event) -> None:
    event = make_event(
        slug="quiet", capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=600
    )
    answers: dict[str, tuple[HttpResponse, int]] = {}
    laptop = new_fan()
    answers["the join form (the same URL as a place)"] = (laptop.get("/e/quiet/"), 200)
    answers["the join, setting the ticket's cookie"] = (laptop.post("/e/quiet/"), 302)
    answers["the waiting page"] = (laptop.get("/e/quiet/"), 200)
    answers["the turn mail's form"] = (laptop.post("/e/quiet/mail", {"email": "a@b.co"}), 302)
    link_page = laptop.post("/e/quiet/move")
    answers["the place link's page"] = (link_page, 200)
    link = re.search(r'id="place-link-url"[^>]*>([^<]+)<', link_page.content.decode()).group(1)
    path = link.split("testserver", 1)[1]
    phone = Client()
    answers["the place link opened"] = (phone.get(path), 200)
    answers["the place claimed, setting the cookie"] = (phone.post(path), 302)
    answers["the page of a place moved away"] = (laptop.get("/e/quiet/"), 200)

    event_tick(event_id=event.id, now=timezone.now())
    to_shop = phone.get("/e/quiet/")
    answers["the redirect to the shop with the pass"] = (to_shop, 302)
    token = parse_qs(urlsplit(to_shop["Location"]).query)["wr_pass"][0]
    shop = {"x-original-host": "shop.example", "x-original-proto": "https"}
    gate_by_query = Client().get(
        "/gate/quiet/check", headers={**shop, "x-original-uri": f"/?wr_pass={token}"}
    )
    answers["the gate's 204, setting the pass's cookie"] = (gate_by_query, 204)
    gate_by_cookie = Client().get(
        "/gate/quiet/check",
        headers={**shop, "x-original-uri": "/", "cookie": f"wr_pass_quiet={token}"},
    )
    answers["the gate's 204 for a cookie"] = (gate_by_cookie, 204)
    answers["the gate's 401"] = (Client().get("/gate/quiet/check", headers=shop), 401)

    assert shop_completes(token, event.integration_key, "abandoned").status_code == 204
    answers["the page offering the way back"] = (phone.get("/e/quiet/"), 200)
    answers["going back in line"] = (phone.post("/e/quiet/", {"reenter": "1"}), 302)
    event_close(event=event, actor="staff:ann", now=timezone.now())
    answers["a join refused"] = (new_fan().post("/e/quiet/"), 409)

    for what, (response, status) in answers.items():
        assert response.status_code == status, (what, response.status_code)
        assert kept_out_of_caches(response), (what, response.get("Cache-Control"))
    assert "wr_pass=" in to_shop["Location"]
    assert "wr_pass_quiet" in gate_by_query["Set-Cookie"]
