from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone
from django_redis import get_redis_connection

from events.models import Event
from queueing import in_process
from queueing.hot.client import reachability_reset
from staff.services import TierSpec, event_create
from tests.mailbox import Mailbox, smtp_server


@pytest.fixture(autouse=True)
def hot_prefix(settings: Any) -> Iterator[str]:
    """Each test gets its own Redis key prefix, removed afterwards."""
    prefix = f"wrtest:{uuid.uuid4().hex[:10]}"
    settings.WR_REDIS_PREFIX = prefix
    in_process.clear_all()
    reachability_reset()
    yield prefix
    in_process.clear_all()
    redis = get_redis_connection("default")
    keys = list(redis.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        redis.delete(*keys)


@pytest.fixture
def redis_client() -> Any:
    return get_redis_connection("default")


MakeEvent = Callable[..., Event]


@pytest.fixture
def lanes() -> int:
    """The lanes ``make_event`` gives an on-sale unless told: a test runs again over several
    lanes with ``@pytest.mark.parametrize("lanes", [1, 4])``."""
    return 1


@pytest.fixture
def make_event(
    db: None, django_capture_on_commit_callbacks: Any, lanes: int, settings: Any
) -> MakeEvent:
    def make(
        slug: str = "onsale",
        tiers: list[TierSpec] | None = None,
        target_url: str = "https://shop.example/checkout",
        **fields: Any,
    ) -> Event:
        fields.setdefault("lanes", lanes)
        if fields["lanes"] > 1:
            # Every poll reads the lanes afresh: the exact figures a test of a short line
            # asserts, rather than the lanes' summary of up to a second ago.
            settings.WR_LANES_SUMMARY_SECONDS = 0
            settings.WR_LANES_SUMMARY_STALE_SECONDS = 0
        # Run the after-commit hooks (marking the new event's index ready) as a commit would.
        with django_capture_on_commit_callbacks(execute=True):
            return event_create(
                actor="test",
                now=timezone.now(),
                slug=slug,
                name=f"On-sale {slug}",
                target_url=target_url,
                tiers=tiers,
                **fields,
            )

    return make


@pytest.fixture
def event(make_event: MakeEvent) -> Event:
    return make_event()


@pytest.fixture(scope="session", autouse=True)
def _no_stray_database_sessions(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Server and worker processes started by tests (some killed on purpose) must not keep
    sessions on the test database, or dropping it at the end, or creating it next time, fails."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def mailbox(settings: Any) -> Iterator[Mailbox]:
    """The room's mail sent to a local SMTP server (tests/mailbox.py), its messages kept."""
    with smtp_server() as (box, port):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
        yield box
