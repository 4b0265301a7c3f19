"""A Queue-it fan's waiting page in a real browser against the real processes: once admitted,
the page's script goes back through the room's queue URL (``handoverUrl``) and lands on the
shop's page with a ``queueittoken`` rather than a ``wr_pass``; a browser without JavaScript
gets there by the page's own refresh."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from queueing.rules.queueit_token import RedirectType, token_read
from tests.browser import chromium
from tests.http import fan_joins, pass_complete, ticket_status
from tests.processes import running_stack, wait_until
from tests.queueit import token_of

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SECRET = "browser-test-secret-0123"


@pytest.mark.parametrize("javascript", [True, False], ids=["script", "no-script"])
def test_an_admitted_queueit_fan_lands_on_the_shop_with_a_token(make_event, javascript) -> None:
    with running_stack() as stack:
        base = stack.web()
        event = make_event(
            slug="sale-1",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=600,
            # The "shop" is the room's own health page: a page on the target's host that
            # answers (a redirect's follow-up cannot be routed to a stub in the browser).
            target_url=f"{base}/",
            queueit_customer_id="acme",
            queueit_secret_key=SECRET,
        )
        stack.worker()
        stack.beat()
        inside = fan_joins(base, "sale-1")["ticket"]
        wait_until(
            lambda: ticket_status(base, inside)["status"] == "admitted",
            timeout=20,
            what="the first fan to be let in",
        )
        with chromium() as browser:
            context = browser.new_context(java_script_enabled=javascript)
            page = context.new_page()
            product = f"{base}/healthz?size=9"
            query = urlencode({"c": "acme", "e": "sale-1", "ver": "javascript-5.0.1", "t": product})
            page.goto(f"{base}/?{query}")
            page.wait_for_selector("#position")
            assert page.inner_text("#position") == "1"

            pass_complete(base, event.integration_key, ticket_status(base, inside)["pass"])
            page.wait_for_url(f"{base}/healthz?**", timeout=60_000)
            url = page.url
            assert url.startswith(product + "&queueittoken=e_sale-1~q_"), url
            assert "wr_pass" not in url
            token = token_read(token_of(url), secret_key=SECRET)
            assert token is not None and token.redirect_type == RedirectType.QUEUE
