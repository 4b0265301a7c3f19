"""The on-sale's logo as the room serves it: the stored type, never sniffed, nothing it could
run, cached for good under a URL that changes with the image; 404 for anything else."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client
from django.utils import timezone

from queueing.web.branding import LOGO_CACHE_CONTROL, LOGO_CONTENT_SECURITY_POLICY
from staff.services import event_logo_change
from tests.images import JPEG, TINY_PNG

pytestmark = pytest.mark.django_db


def with_logo(event, image: bytes = TINY_PNG):
    return event_logo_change(event=event, actor="t", now=timezone.now(), image=image)


def test_the_logo_is_served_with_its_type_and_safe_headers(event) -> None:
    event = with_logo(event)
    response = Client().get(f"/e/{event.slug}/logo/{event.logo_sha256}")
    assert response.status_code == 200
    assert response.content == TINY_PNG
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == LOGO_CONTENT_SECURITY_POLICY
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert response["Cache-Control"] == LOGO_CACHE_CONTROL
    assert "immutable" in response["Cache-Control"] and "max-age=31536000" in LOGO_CACHE_CONTROL
    assert response["ETag"] == f'"{event.logo_sha256}"'


def test_a_browser_holding_it_is_told_it_has_not_changed(event) -> None:
    event = with_logo(event)
    url = f"/e/{event.slug}/logo/{event.logo_sha256}"
    again = Client().get(url, HTTP_IF_NONE_MATCH=f'"{event.logo_sha256}"')
    assert again.status_code == 304 and again.content == b""
    assert Client().head(url).status_code == 200


def test_a_new_logo_is_a_new_url_and_the_old_one_is_gone(event) -> None:
    old = with_logo(event).logo_sha256
    event = with_logo(event, JPEG)
    assert event.logo_sha256 == hashlib.sha256(JPEG).hexdigest() != old
    assert Client().get(f"/e/{event.slug}/logo/{old}").status_code == 404
    response = Client().get(f"/e/{event.slug}/logo/{event.logo_sha256}")
    assert (response.status_code, response["Content-Type"]) == (200, "image/jpeg")


def test_wrong_digests_slugs_and_no_logo_are_404(make_event, event) -> None:
    other = make_event(slug="other")
    assert Client().get(f"/e/{event.slug}/logo/{'0' * 64}").status_code == 404  # no logo yet
    event = with_logo(event)
    sha = event.logo_sha256
    for url in (
        f"/e/{event.slug}/logo/{'0' * 64}",
        f"/e/{event.slug}/logo/{sha.upper()}",
        f"/e/{event.slug}/logo/{sha[:-1]}",
        f"/e/{event.slug}/logo/{sha}x",
        f"/e/{other.slug}/logo/{sha}",  # another on-sale's logo is not this one's
        f"/e/nope/logo/{sha}",
        f"/e/{event.slug}/logo/",
    ):
        assert Client().get(url).status_code == 404, url
    with_logo_removed = event_logo_change(event=event, actor="t", now=timezone.now(), image=None)
    assert with_logo_removed.logo_sha256 == ""
    assert Client().get(f"/e/{event.slug}/logo/{sha}").status_code == 404


def test_only_reads_are_allowed(event) -> None:
    event = with_logo(event)
    response = Client().post(f"/e/{event.slug}/logo/{event.logo_sha256}")
    assert response.status_code == 405
