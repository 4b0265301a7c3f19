"""The queueittoken as Queue-it's connectors check it (docs/queueit.md): every field there,
``h_`` last and lower-case hex HMAC-SHA256 of the rest under the secret key, ``ts_`` 180 s
ahead; the token appended to a return URL; the connector's cancel lists."""

from __future__ import annotations

import hashlib
import hmac
import uuid

import pytest

from queueing.rules.queueit_token import (
    CANCEL_PAIRS_MAX,
    CancelPair,
    RedirectType,
    cancel_pairs,
    token_mint,
    token_read,
    with_token,
)

SECRET = "4e1deb4a-9d2b-4c2a-b0d4-secret"
QUEUE_ID = uuid.UUID("0f7c4b1e-5d0e-4a53-9f6b-2e0b2c8e9a11")


def test_the_token_is_what_the_connector_checks() -> None:
    token = token_mint(
        event_id="sale-1",
        queue_id=QUEUE_ID,
        now=1_800_000_000.7,
        redirect_type=RedirectType.QUEUE,
        secret_key=SECRET,
    )
    body, _, given = token.rpartition("~h_")
    assert body == f"e_sale-1~q_{QUEUE_ID}~ts_1800000180~ce_true~rt_queue"
    expected = hmac.new(SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
    assert given == expected and given == given.lower()
    # Every field splits on "_" into exactly two parts (the connector drops any other).
    assert all(field.count("_") == 1 for field in token.split("~"))
    read = token_read(token, secret_key=SECRET)
    assert read is not None
    assert (read.event_id, read.queue_id, read.expires_at, read.redirect_type) == (
        "sale-1",
        QUEUE_ID,
        1_800_000_180,
        RedirectType.QUEUE,
    )


def test_a_token_under_another_key_or_changed_is_not_read() -> None:
    token = token_mint(
        event_id="sale-1",
        queue_id=QUEUE_ID,
        now=0,
        redirect_type=RedirectType.SAFETY_NET,
        secret_key=SECRET,
    )
    assert "~rt_safetynet~" in token
    assert token_read(token, secret_key=SECRET + "x") is None
    assert token_read(token.replace("e_sale-1", "e_sale-2"), secret_key=SECRET) is None
    assert token_read("garbage", secret_key=SECRET) is None


@pytest.mark.parametrize("event_id", ["", "a_b", "a~b"])
def test_an_event_id_the_grammar_cannot_carry_is_refused(event_id: str) -> None:
    with pytest.raises(ValueError):
        token_mint(
            event_id=event_id,
            queue_id=QUEUE_ID,
            now=0,
            redirect_type=RedirectType.QUEUE,
            secret_key=SECRET,
        )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://shop.example/p", "https://shop.example/p?queueittoken=T~h_x"),
        ("https://shop.example/p?a=1&b=2", "https://shop.example/p?a=1&b=2&queueittoken=T~h_x"),
        (
            "https://shop.example/p?queueittoken=old&a=%20#frag",
            "https://shop.example/p?a=+&queueittoken=T~h_x#frag",
        ),
    ],
)
def test_the_token_goes_last_in_the_query_replacing_an_old_one(url: str, expected: str) -> None:
    assert with_token(url, "T~h_x") == expected


def test_cancel_lists() -> None:
    other = uuid.uuid4()
    assert cancel_pairs(f"sale-1~{QUEUE_ID}_sale-2_sale-3~{other}") == [
        CancelPair("sale-1", QUEUE_ID),
        CancelPair("sale-2", None),
        CancelPair("sale-3", other),
    ]
    # A queue id that is no ticket of this room drops its pair; empty items are skipped.
    assert cancel_pairs("sale-1~not-a-uuid__") == []
    many = "_".join(f"e{i}" for i in range(50))
    assert len(cancel_pairs(many)) == CANCEL_PAIRS_MAX
