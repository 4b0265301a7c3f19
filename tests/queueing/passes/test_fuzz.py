"""Thousands of mutations of real tickets and passes: none is accepted."""

import random

import pytest
from django.utils import timezone

from queueing.passes.signing import PassInvalid, pass_decode, pass_issue
from queueing.rules.ticket_codec import InvalidTicket, TicketRef, ticket_issue, ticket_read
from tests.helpers import entry_of, fans_join

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \x00é"


def mutations(original: str, count: int, seed: int):
    rng = random.Random(seed)
    seen = set()
    while len(seen) < count:
        chars = list(original)
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            position = rng.randrange(len(chars) + 1)
            if kind < 0.4 and chars:
                chars[min(position, len(chars) - 1)] = rng.choice(ALPHABET)
            elif kind < 0.7:
                chars.insert(position, rng.choice(ALPHABET))
            elif chars:
                del chars[min(position, len(chars) - 1)]
        mutated = "".join(chars)
        if mutated != original and mutated not in seen:
            seen.add(mutated)
            yield mutated


def test_no_mutated_ticket_is_accepted() -> None:
    original = ticket_issue(TicketRef(entry_id=123456, event_id=42, tier_id=7))
    assert ticket_read(original) == TicketRef(entry_id=123456, event_id=42, tier_id=7)
    accepted = []
    for mutated in mutations(original, 5000, seed=1):
        try:
            ref = ticket_read(mutated)
        except InvalidTicket:
            continue
        accepted.append((mutated, ref))
    assert accepted == []


@pytest.mark.django_db
def test_no_mutated_pass_is_accepted(make_event) -> None:
    event = make_event()
    (ticket,) = fans_join(event.slug, 1)
    entry = entry_of(ticket)
    now = timezone.now()
    original = pass_issue(
        event_slug=event.slug,
        ticket_id=entry.public_id,
        tier="General",
        admitted_at=now,
        expires_at=now + timezone.timedelta(minutes=10),
        now=now,
    )
    pass_decode(original, now=now)  # the genuine one is fine
    accepted = []
    for mutated in mutations(original, 3000, seed=2):
        try:
            claims = pass_decode(mutated, now=now)
        except PassInvalid:
            continue
        accepted.append((mutated, claims))
    assert accepted == []
