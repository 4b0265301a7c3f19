import base64
import re

import pytest
from django.conf import settings
from django.core import signing
from django.test import override_settings
from django.utils.encoding import force_bytes

from queueing.rules import ticket_codec
from queueing.rules.ticket_codec import InvalidTicket, TicketRef, ticket_issue, ticket_read

REF = TicketRef(entry_id=12345, event_id=7, tier_id=3)
OTHER_KEY = "another-room-entirely-" + "k" * 40


def signed_ticket(payload: str) -> str:
    """A ticket of the earlier, Django-signed format, which no release ever issued to a fan."""
    return signing.Signer(salt="waitingroom.ticket.v1", sep=".").sign(payload)


def decoded(ticket: str) -> bytes:
    return base64.urlsafe_b64decode(ticket + "=" * (-len(ticket) % 4))


def test_a_ticket_round_trips_and_is_url_safe() -> None:
    ticket = ticket_issue(REF)
    assert ticket_read(ticket) == REF
    assert re.fullmatch(r"[A-Za-z0-9_-]+", ticket)
    assert len(ticket) <= ticket_codec.MAX_TICKET_LENGTH


def test_consecutive_tickets_reveal_no_ids() -> None:
    # Entry ids are drawn in join order: readable, two tickets would tell how many joined.
    first = TicketRef(entry_id=1_234_567, event_id=4242, tier_id=4343)
    second = TicketRef(entry_id=1_234_568, event_id=4242, tier_id=4343)
    a, b = ticket_issue(first), ticket_issue(second)
    assert (ticket_read(a), ticket_read(b)) == (first, second)
    for ticket, ref in ((a, first), (b, second)):
        raw = decoded(ticket)
        for value in (ref.entry_id, ref.event_id, ref.tier_id):
            assert str(value) not in ticket
            assert str(value).encode() not in raw
            for width in (4, 8):
                assert value.to_bytes(width, "big") not in raw
                assert value.to_bytes(width, "little") not in raw
    # Not a stream cipher under a fixed nonce either: neighbours differ almost everywhere.
    same = sum(x == y for x, y in zip(decoded(a), decoded(b), strict=True))
    assert same < 8
    # And the length does not grow with the ids.
    huge = TicketRef(entry_id=2**62, event_id=2**40, tier_id=2**40)
    assert len(ticket_issue(TicketRef(entry_id=1, event_id=1, tier_id=1))) == len(
        ticket_issue(huge)
    )


def test_one_entry_always_gets_the_same_ticket() -> None:
    # Pages, cookies and sockets compare tickets: re-issuing one must not change it.
    assert ticket_issue(REF) == ticket_issue(TicketRef(12345, 7, 3))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t[:-1],  # truncated
        lambda t: t[: len(t) // 2],
        lambda t: "A" + t[1:] if t[0] != "A" else "B" + t[1:],  # first byte changed
        lambda t: t[:20] + ("A" if t[20] != "A" else "B") + t[21:],  # a middle byte changed
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # last byte changed
        lambda t: t + "x",
        lambda t: t + "==",  # padded
        lambda t: t.replace("-", "+").replace("_", "/") if ("-" in t or "_" in t) else "+" + t,
        lambda t: t[::-1],
        lambda t: "",
        lambda t: "x" * 500,
        lambda t: "12345-7-3",  # the old payload, unsigned
    ],
)
def test_tampered_or_truncated_tickets_are_rejected(mutate) -> None:
    with pytest.raises(InvalidTicket):
        ticket_read(mutate(ticket_issue(REF)))


def test_only_one_spelling_of_a_ticket_is_read() -> None:
    ticket = ticket_issue(REF)
    # 40 bytes leave two spare bits in the last character: setting them must not pass.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(ticket[-1])
    for spare in (1, 2, 3):
        variant = ticket[:-1] + alphabet[last | spare]
        assert decoded(variant) == decoded(ticket)
        with pytest.raises(InvalidTicket):
            ticket_read(variant)


def test_a_ticket_issued_with_another_key_is_rejected() -> None:
    with override_settings(SECRET_KEY=OTHER_KEY):
        foreign = ticket_issue(REF)
    with pytest.raises(InvalidTicket):
        ticket_read(foreign)


def test_tickets_survive_a_secret_key_rotation() -> None:
    # Issued under the old key, read after it moved to SECRET_KEY_FALLBACKS.
    with override_settings(SECRET_KEY=OTHER_KEY):
        sealed = ticket_issue(REF)
    with override_settings(SECRET_KEY="the-new-key-" + "n" * 40, SECRET_KEY_FALLBACKS=[OTHER_KEY]):
        assert ticket_read(sealed) == REF
        assert ticket_issue(REF) != sealed  # new tickets use the new key


@pytest.mark.parametrize("payload", ["12345-7-3", "0-1-2", "1-2", "99999999999999999999-1-1"])
def test_the_earlier_signed_format_is_not_read(payload: str) -> None:
    # Retired: no release of the room ever issued it to anyone, and it shows ids in clear.
    with pytest.raises(InvalidTicket):
        ticket_read(signed_ticket(payload))


def test_an_authentic_ticket_with_impossible_ids_is_rejected() -> None:
    # Only the room can seal one, but ids a database would refuse never get past the door.
    for ids in ((0, 7, 3), (12345, 0, 3), (2**63, 7, 3)):
        sealed = ticket_codec._cipher(force_bytes(settings.SECRET_KEY)).encrypt(
            ticket_codec._IDS.pack(*ids), None
        )
        with pytest.raises(InvalidTicket):
            ticket_read(base64.urlsafe_b64encode(sealed).rstrip(b"=").decode())


def test_a_moved_places_ticket_names_its_holder_and_differs_from_the_one_before() -> None:
    """Issue 28, item 4: the browser a place moved to holds a ticket of its own."""
    holder = "0123456789abcdef" * 2
    moved = TicketRef(entry_id=12345, event_id=7, tier_id=3, holder=holder)
    ticket = ticket_issue(moved)
    assert len(ticket) == 75 and len(ticket_issue(REF)) == 54
    assert ticket_read(ticket) == moved
    assert ticket_read(ticket_issue(REF)).holder == ""
    assert ticket != ticket_issue(REF)
    assert holder not in ticket and bytes.fromhex(holder) not in decoded(ticket)
    for bad in ("", ticket[:-1], ticket + "A", ticket[:54]):
        if bad != ticket_issue(REF):
            with pytest.raises(InvalidTicket):
                ticket_read(bad)
    with pytest.raises(ValueError):
        ticket_issue(TicketRef(entry_id=1, event_id=1, tier_id=1, holder="not hex"))


def test_a_ticket_carries_the_fans_lane_and_lane_0_is_the_ticket_it_always_was() -> None:
    laned = TicketRef(entry_id=12345, event_id=7, tier_id=3, lane=63)
    ticket = ticket_issue(laned)
    assert ticket_read(ticket) == laned
    assert len(ticket) == len(ticket_issue(REF))
    assert ticket_issue(TicketRef(12345, 7, 3, lane=0)) == ticket_issue(REF)
    assert ticket != ticket_issue(REF)
    moved = TicketRef(entry_id=1, event_id=2, tier_id=3, holder="ab" * 16, lane=5)
    assert ticket_read(ticket_issue(moved)) == moved
    with pytest.raises(ValueError):
        ticket_issue(TicketRef(entry_id=1, event_id=1, tier_id=2**56, lane=1))
