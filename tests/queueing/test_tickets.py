import pytest
from django.test import override_settings

from queueing.rules.tickets import InvalidTicket, TicketRef, ticket_issue, ticket_read

REF = TicketRef(entry_id=12345, event_id=7, tier_id=3)


def test_a_ticket_round_trips_and_is_url_safe() -> None:
    ticket = ticket_issue(REF)
    assert ticket_read(ticket) == REF
    assert all(c.isalnum() or c in "-_." for c in ticket)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t[:-1],  # truncated signature
        lambda t: t[: len(t) // 2],
        lambda t: "9" + t,  # payload changed
        lambda t: t.replace("12345", "12346"),
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # signature changed
        lambda t: t + "x",
        lambda t: t.split(".")[0],  # no signature
        lambda t: "",
        lambda t: "x" * 500,
    ],
)
def test_tampered_or_truncated_tickets_are_rejected(mutate) -> None:
    with pytest.raises(InvalidTicket):
        ticket_read(mutate(ticket_issue(REF)))


def test_a_ticket_signed_with_another_key_is_rejected() -> None:
    with override_settings(SECRET_KEY="another-room-entirely-" + "k" * 40):
        foreign = ticket_issue(REF)
    with pytest.raises(InvalidTicket):
        ticket_read(foreign)


def test_a_signed_but_malformed_payload_is_rejected() -> None:
    from django.core import signing

    forged = signing.Signer(salt="waitingroom.ticket.v1", sep=".").sign("0-1-2")
    with pytest.raises(InvalidTicket):
        ticket_read(forged)
