"""Who a registering fan is, the hash that stands for them, and the shop's signed identity
(queueing/rules/registrations.py): pure."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import jwt
import pytest

from queueing.rules.registrations import (
    ShopTokenInvalid,
    confirm_token,
    confirm_token_valid,
    email_identity,
    identity_hash,
    registration_hash,
    shop_token_verify,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
KEY = "s" * 40


def token(**claims: object) -> str:
    base = {"sub": "acct-1", "aud": "tour", "iat": int(NOW.timestamp())}
    base["exp"] = base["iat"] + 600
    return jwt.encode({**base, **claims}, KEY, algorithm="HS256")


def test_an_address_is_one_identity_whatever_its_case_and_spaces() -> None:
    assert email_identity(" Fan@Example.COM ") == email_identity("fan@example.com")


def test_the_identity_hash_is_keyed_and_the_published_hash_hides_it() -> None:
    identity = email_identity("fan@example.com")
    assert identity_hash("a" * 64, identity) != identity_hash("b" * 64, identity)
    digest = identity_hash("a" * 64, identity)
    published = registration_hash(uuid.UUID(int=1), "General", digest)
    assert len(published) == 64 and "fan" not in published
    assert published != registration_hash(uuid.UUID(int=1), "VIP", digest)


def test_a_confirmation_token_holds_only_under_its_key() -> None:
    registration = uuid.uuid4()
    good = confirm_token("a" * 64, registration)
    assert confirm_token_valid("a" * 64, good)
    assert not confirm_token_valid("b" * 64, good)
    assert not confirm_token_valid("a" * 64, good[:-1] + ("0" if good[-1] != "0" else "1"))
    assert not confirm_token_valid("a" * 64, "not-a-token")


def test_a_shop_token_names_its_account() -> None:
    assert shop_token_verify(token(), key=KEY, slug="tour", now=NOW).sub == "acct-1"


@pytest.mark.parametrize(
    ("claims", "key", "slug"),
    [
        ({}, "x" * 40, "tour"),  # another key
        ({}, KEY, "other"),  # another on-sale
        ({"exp": int(NOW.timestamp()) - 1}, KEY, "tour"),  # expired
        ({"exp": int(NOW.timestamp()) + 7200}, KEY, "tour"),  # valid for too long
        ({"sub": ""}, KEY, "tour"),  # no account
        ({}, "", "tour"),  # the on-sale takes no shop identities
    ],
)
def test_a_shop_token_is_refused_when_it_does_not_hold(claims: dict, key: str, slug: str) -> None:
    with pytest.raises(ShopTokenInvalid):
        shop_token_verify(token(**claims), key=key, slug=slug, now=NOW)


def test_a_shop_token_without_expiry_or_in_another_algorithm_is_refused() -> None:
    unbounded = jwt.encode({"sub": "a", "aud": "tour"}, KEY, algorithm="HS256")
    with pytest.raises(ShopTokenInvalid):
        shop_token_verify(unbounded, key=KEY, slug="tour", now=NOW)
    unsigned = jwt.encode({"sub": "a", "aud": "tour", "exp": 2**40}, None, algorithm="none")
    with pytest.raises(ShopTokenInvalid):
        shop_token_verify(unsigned, key=KEY, slug="tour", now=NOW)
