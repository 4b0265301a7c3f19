"""Staff password logins are throttled per account and per client address
(dashboard/login_throttle.py, on the admin's login, which /dashboard/ sends staff to)."""

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from io import StringIO

import pytest
import redis
from django.contrib.auth.signals import user_login_failed
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from redis.backoff import NoBackoff
from redis.retry import Retry

from dashboard.login_throttle import login_lockouts_purge
from dashboard.models import LockoutScope, LoginLockout
from tests.helpers import staff_client, staff_user

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
RIGHT = "a-long-right-password"
LOCKED = "Too many failed logins for this account or address; try again in"


def log_in(client: Client, username: str, password: str = RIGHT, **extra: str):
    return client.post(LOGIN, {"username": username, "password": password}, **extra)


def logged_in(client: Client) -> bool:
    return client.get("/dashboard/").status_code == 200


def test_five_wrong_passwords_lock_the_account_even_for_the_right_one(caplog) -> None:
    staff_user("ann", "view_event", password=RIGHT)
    caplog.set_level(logging.WARNING, logger="waitingroom.security")
    client = Client()
    answers = [log_in(client, "ann", f"wrong-{n}") for n in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 429]
    assert b"Please enter the correct username and password" in answers[0].content

    refused = log_in(client, "ann")
    assert refused.status_code == 429
    assert 890 <= int(refused["Retry-After"]) <= 900
    assert f"{LOCKED} 15 minutes.".encode() in refused.content
    assert b'name="password"' in refused.content  # the login page, with the lockout as error
    assert not logged_in(client)
    # The lockout is recorded, once, and logged at WARNING as one structured line.
    lockout = LoginLockout.objects.get()
    assert (lockout.scope, lockout.username, lockout.address, lockout.failures) == (
        "account",
        "ann",
        "127.0.0.1",
        5,
    )
    assert 890 <= (lockout.locked_until - lockout.at).total_seconds() <= 900
    lines = [r for r in caplog.records if r.name == "waitingroom.security"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert lines[0].message == "login_lockout"
    assert (lines[0].scope, lines[0].username) == ("account", "ann")


def test_an_unknown_username_is_locked_out_like_a_real_one() -> None:
    client = Client()
    statuses = [log_in(client, "ghost", "guess").status_code for _ in range(6)]
    assert statuses == [200] * 4 + [429] * 2
    assert LoginLockout.objects.get().username == "ghost"


def test_the_address_budget_limits_other_accounts_from_that_address(settings) -> None:
    settings.WR_LOGIN_FAILURES_PER_ADDRESS = 6
    for name in ("ann", "bob", "cy"):
        staff_user(name, "view_event", password=RIGHT)
    # IPv6 is budgeted per /64: two addresses of one subscriber share the budget.
    first, second = Client(REMOTE_ADDR="2001:db8:1:1::1"), Client(REMOTE_ADDR="2001:db8:1:1::2")
    statuses = [log_in(first, "ann", "wrong").status_code for _ in range(3)]
    statuses += [log_in(second, "bob", "wrong").status_code for _ in range(3)]
    assert statuses == [200] * 5 + [429]

    refused = log_in(Client(REMOTE_ADDR="2001:db8:1:1::3"), "cy")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert LOCKED.encode() in refused.content
    lockout = LoginLockout.objects.get()
    assert (lockout.scope, lockout.address_bucket) == ("address", "2001:db8:1:1::/64")
    # Neither account is locked out: from another /64 the right passwords work.
    elsewhere = Client(REMOTE_ADDR="2001:db8:1:2::1")
    assert log_in(elsewhere, "cy").status_code == 302
    assert log_in(Client(REMOTE_ADDR="203.0.113.5"), "ann").status_code == 302


def test_the_address_is_the_client_behind_trusted_proxies(settings) -> None:
    settings.WR_TRUSTED_PROXY_COUNT = 1
    settings.WR_LOGIN_FAILURES_PER_ADDRESS = 3
    settings.WR_LOGIN_FAILURES_PER_ACCOUNT = 0
    proxy = {"REMOTE_ADDR": "10.0.0.1"}
    for _ in range(3):
        log_in(Client(**proxy), "ann", "wrong", HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert LoginLockout.objects.get().address == "198.51.100.7"
    staff_user("bob", "view_event", password=RIGHT)
    # Another client through the same proxy is not locked out.
    assert log_in(Client(**proxy), "bob", HTTP_X_FORWARDED_FOR="198.51.100.8").status_code == 302


def test_after_the_lockout_the_right_password_works(settings) -> None:
    settings.WR_LOGIN_LOCKOUT_SECONDS = 1
    staff_user("ann", "view_event", password=RIGHT)
    client = Client()
    for _ in range(5):
        log_in(client, "ann", "wrong")
    refused = log_in(client, "ann")
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    assert f"{LOCKED} 1 minute.".encode() in refused.content
    time.sleep(1.1)
    assert log_in(client, "ann").status_code == 302
    assert logged_in(client)


def test_a_login_clears_the_accounts_failures_but_not_the_addresss(settings) -> None:
    settings.WR_LOGIN_FAILURES_PER_ADDRESS = 10
    staff_user("ann", "view_event", password=RIGHT)
    staff_user("bob", "view_event", password=RIGHT)
    client = Client()
    assert [log_in(client, "ann", "wrong").status_code for _ in range(4)] == [200] * 4
    assert log_in(client, "ann").status_code == 302
    # The account starts afresh: four more failures do not lock it out.
    assert [log_in(Client(), "ann", "wrong").status_code for _ in range(4)] == [200] * 4
    assert log_in(Client(), "ann").status_code == 302
    # The address still holds its 8 failures: two more lock it out, for bob too.
    assert [log_in(Client(), "bob", "wrong").status_code for _ in range(2)] == [200, 429]
    assert log_in(Client(), "bob").status_code == 429


def test_the_dashboard_logs_staff_in_through_the_throttled_login() -> None:
    staff_user("ann", "view_event", password=RIGHT)
    client = Client()
    to_login = client.get("/dashboard/")
    assert to_login.status_code == 302 and to_login["Location"].startswith(f"{LOGIN}?next=")
    page = client.get(to_login["Location"])
    assert page.status_code == 200 and b'name="password"' in page.content
    answer = client.post(
        to_login["Location"], {"username": "ann", "password": RIGHT, "next": "/dashboard/"}
    )
    assert answer.status_code == 302 and answer["Location"] == "/dashboard/"
    assert logged_in(client)


def test_the_login_form_still_needs_its_csrf_token(redis_client, hot_prefix) -> None:
    staff_user("ann", "view_event", password=RIGHT)
    browser = Client(enforce_csrf_checks=True)
    for _ in range(6):
        assert log_in(browser, "ann", "wrong").status_code == 403
    # Refused before any password was checked: nothing counted, no lockout.
    assert list(redis_client.scan_iter(match=f"{hot_prefix}:{{login:*")) == []
    browser.get(LOGIN)
    token = browser.cookies["csrftoken"].value
    answer = browser.post(
        LOGIN, {"username": "ann", "password": RIGHT, "csrfmiddlewaretoken": token}
    )
    assert answer.status_code == 302 and logged_in(browser)


@pytest.mark.django_db(transaction=True)
def test_a_parallel_burst_checks_no_more_passwords_than_the_budget(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="waitingroom.security")
    staff_user("ann", "view_event", password=RIGHT)
    checked = []

    def count(**kwargs: object) -> None:
        checked.append(1)

    user_login_failed.connect(count, dispatch_uid="test-burst")

    def attempt(n: int) -> int:
        try:
            return log_in(Client(), "ann", f"wrong-{n}").status_code
        finally:
            connection.close()

    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            statuses = list(pool.map(attempt, range(30)))
    finally:
        user_login_failed.disconnect(dispatch_uid="test-burst")
    assert len(checked) <= 5, caplog.text  # (the throttle fails open if Redis did not answer)
    assert statuses.count(429) >= 25, statuses
    assert log_in(Client(), "ann").status_code == 429


def test_logins_go_unthrottled_while_redis_is_down(monkeypatch, caplog) -> None:
    dead = redis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    monkeypatch.setattr("queueing.hot.client.client", lambda: dead)
    monkeypatch.setattr("queueing.hot.rate_limits.client", lambda: dead)
    caplog.set_level(logging.WARNING, logger="waitingroom.security")
    staff_user("ann", "view_event", password=RIGHT)
    client = Client()
    assert [log_in(client, "ann", "wrong").status_code for _ in range(7)] == [200] * 7
    assert log_in(client, "ann").status_code == 302
    assert any("login_throttle_unavailable" in r.message for r in caplog.records)
    assert not LoginLockout.objects.exists()


def test_lockouts_are_listed_read_only_in_the_admin() -> None:
    client = Client()
    for _ in range(5):
        log_in(client, "ghost", "guess")
    client = staff_client("root", superuser=True)
    listing = client.get("/admin/dashboard/loginlockout/?scope__exact=account")
    assert listing.status_code == 200 and b"ghost" in listing.content
    assert b"?scope__exact=address" in listing.content  # the filter
    assert client.get("/admin/dashboard/loginlockout/?scope__exact=address").status_code == 200
    assert b"ghost" not in client.get("/admin/dashboard/loginlockout/?scope__exact=address").content
    assert client.get("/admin/dashboard/loginlockout/add/").status_code == 403
    lockout = LoginLockout.objects.get()
    assert client.post(f"/admin/dashboard/loginlockout/{lockout.pk}/delete/").status_code == 403


def test_an_operator_can_lift_a_lockout_early(settings) -> None:
    settings.WR_LOGIN_FAILURES_PER_ADDRESS = 5
    staff_user("ann", "view_event", password=RIGHT)
    for _ in range(5):
        log_in(Client(REMOTE_ADDR="2001:db8::7"), "ann", "wrong")
    assert log_in(Client(REMOTE_ADDR="2001:db8::7"), "ann").status_code == 429
    out = StringIO()
    call_command("login_unlock", username="ann", address="2001:db8::9", stdout=out)
    assert out.getvalue().strip() == "lifted: account ann, address 2001:db8::/64"
    assert log_in(Client(REMOTE_ADDR="2001:db8::7"), "ann").status_code == 302
    with pytest.raises(CommandError):
        call_command("login_unlock")


def test_lockout_records_are_purged_once_past_their_keeping_time() -> None:
    now = timezone.now()

    def lockout(ended_days_ago: float) -> LoginLockout:
        until = now - dt.timedelta(days=ended_days_ago)
        return LoginLockout.objects.create(
            at=until - dt.timedelta(minutes=15),
            scope=LockoutScope.ACCOUNT,
            username="ann",
            address="198.51.100.7",
            address_bucket="198.51.100.7",
            failures=5,
            locked_until=until,
        )

    old, recent, running = lockout(31), lockout(29), lockout(-0.01)
    assert login_lockouts_purge(now=now, keep_days=30) == 1
    assert set(LoginLockout.objects.values_list("pk", flat=True)) == {recent.pk, running.pk}
    assert not LoginLockout.objects.filter(pk=old.pk).exists()
