"""Invitations (queueing/line/invitations.py): the winners invited at the draw, each code
joining the line once and only as its registration, and the next waitlisted fans invited in
draw order as invitations lapse unused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from queueing.line import invitations as invitations_module
from queueing.line.draw import draw_work_due, registration_draw
from queueing.line.invitations import invitation_redeem, invitations_lapse
from queueing.line.leaving import entry_leave
from queueing.line.registration import registration_create
from queueing.models import AuditAction, AuditRecord, Invitation, Registration
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.errors import InvalidAccessCode, QueueError
from queueing.rules.registrations import invitation_code
from queueing.rules.ticket_codec import ticket_read
from staff.services import TierSpec, event_close
from tests.helpers import entry_of, registration_window_open, registrations_made, shop_token

pytestmark = pytest.mark.django_db


def drawn(event, *, winners: int, waitlist: int, by_mail: int = 0, by_shop: int = 0):
    window = registration_window_open(event, winners=winners, waitlist=waitlist)
    made = registrations_made(event, by_mail=by_mail, by_shop=by_shop)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    window.refresh_from_db()
    return window, made


def code_of(window, registration: Registration) -> str:
    return invitation_code(
        window.identity_key, Invitation.objects.get(registration=registration).id
    )


def test_the_draw_invites_its_winners_and_nobody_else(event) -> None:
    window, _ = drawn(event, winners=3, waitlist=2, by_mail=4, by_shop=4)
    invited = Registration.objects.filter(invitation__isnull=False)
    assert set(invited.values_list("outcome", flat=True)) == {"won"} and invited.count() == 3
    expires = Invitation.objects.values_list("expires_at", flat=True).distinct()
    assert list(expires) == [window.drawn_at + timedelta(hours=48)]
    assert AuditRecord.objects.filter(action=AuditAction.INVITED).count() == 3


def test_an_invitation_joins_once_and_only_as_its_registration(make_event) -> None:
    event = make_event(
        slug="vip",
        capacity=0,
        tiers=[TierSpec(name="General"), TierSpec(name="Club", priority=1, access_codes=["CLUB1"])],
    )
    window = registration_window_open(event, winners=2, waitlist=0)
    for n in range(2):
        registration_create(
            event=event,
            now=timezone.now(),
            shop_token=shop_token(f"c{n}", slug="vip"),
            access_code="CLUB1",
        )
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    window.refresh_from_db()
    first, second = Registration.objects.order_by("draw_rank")
    now = timezone.now()
    joined = invitation_redeem(event=event, code=code_of(window, first), now=now)
    assert joined.result.created and entry_of(joined.result.answer.ticket).tier.name == "Club"
    again = invitation_redeem(event=event, code=code_of(window, first).upper(), now=now)
    assert not again.result.created and again.result.answer.ticket == joined.result.answer.ticket
    other = invitation_redeem(event=event, code=code_of(window, second), now=now)
    assert entry_of(other.result.answer.ticket).pk != entry_of(joined.result.answer.ticket).pk
    assert Invitation.objects.get(registration=first).status == "used"
    # The place ended: the code joins nobody again.
    entry_leave(ref=ticket_read(joined.result.answer.ticket), now=now)
    with pytest.raises(InvalidAccessCode):
        invitation_redeem(event=event, code=code_of(window, first), now=now)
    with pytest.raises(InvalidAccessCode):
        invitation_redeem(event=event, code="0" * 32, now=now)
    assert AuditRecord.objects.filter(action=AuditAction.INVITATION_USED).count() == 2
    assert audit_chain_verify(event_id=event.id).ok


def test_lapsed_invitations_invite_the_waitlist_in_draw_order(event) -> None:
    window, _ = drawn(event, winners=2, waitlist=3, by_shop=8)
    first_winner = Registration.objects.get(outcome="won", draw_rank=1)
    later = window.drawn_at + timedelta(hours=48)
    assert not draw_work_due(later - timedelta(seconds=1))
    invitation_redeem(
        event=event, code=code_of(window, first_winner), now=later - timedelta(hours=1)
    )
    assert draw_work_due(later)
    assert invitations_lapse(now=later) == 1  # the used one does not lapse
    assert not draw_work_due(later)
    waitlisted = list(Registration.objects.filter(outcome="waitlisted").order_by("draw_rank"))
    assert [hasattr(r, "invitation") for r in waitlisted] == [True, False, False]
    assert (
        Invitation.objects.get(registration__draw_rank=2, registration__outcome="won").status
        == "lapsed"
    )
    with pytest.raises(InvalidAccessCode):
        invitation_redeem(
            event=event,
            code=code_of(window, Registration.objects.get(outcome="won", draw_rank=2)),
            now=later,
        )
    # The next one lapses in its turn: the waitlist's second is invited, never the lost.
    invitations_lapse(now=later + timedelta(hours=48))
    invited = Registration.objects.filter(outcome="waitlisted", invitation__isnull=False)
    assert sorted(invited.values_list("draw_rank", flat=True)) == [3, 4]
    assert not Registration.objects.filter(outcome="lost", invitation__isnull=False).exists()


def test_a_shop_fan_signed_in_again_is_given_their_invitation(event) -> None:
    window, _ = drawn(event, winners=5, waitlist=0, by_shop=2)
    again = registration_create(
        event=event, now=timezone.now(), shop_token=shop_token("account-1", slug=event.slug)
    )
    assert again.invitation is not None and again.invitation.status == "sent"
    assert again.invitation.code == code_of(window, again.registration)


def test_a_use_in_time_is_not_lapsed_by_a_run_that_comes_during_its_join(
    event, monkeypatch
) -> None:
    window, _ = drawn(event, winners=1, waitlist=1, by_shop=3)
    winner = Registration.objects.get(outcome="won")
    expires = Invitation.objects.get(registration=winner).expires_at
    joining = invitations_module.entry_join

    def lapse_run_meanwhile(**join):
        # The lapse run's clock is past the expiry, the use's was not: it comes between the
        # use's checks and its join's commit.
        invitations_lapse(now=expires + timedelta(seconds=1))
        return joining(**join)

    monkeypatch.setattr(invitations_module, "entry_join", lapse_run_meanwhile)
    used = invitation_redeem(
        event=event, code=code_of(window, winner), now=expires - timedelta(seconds=1)
    )
    invitation = Invitation.objects.get(registration=winner)
    assert invitation.status == "used"
    assert invitation.entry_id == entry_of(used.result.answer.ticket).pk
    # Nobody invited in the place of a fan who came in time.
    assert not Invitation.objects.filter(registration__outcome="waitlisted").exists()
    assert AuditRecord.objects.filter(action=AuditAction.INVITATION_USED).count() == 1
    assert not AuditRecord.objects.filter(action=AuditAction.INVITATION_LAPSED).exists()


def test_a_join_refused_gives_the_claim_back(event) -> None:
    window, _ = drawn(event, winners=1, waitlist=0, by_shop=2)
    winner = Registration.objects.get(outcome="won")
    event_close(event=event, actor="test", now=timezone.now())
    event.refresh_from_db()
    with pytest.raises(QueueError):
        invitation_redeem(event=event, code=code_of(window, winner), now=timezone.now())
    invitation = Invitation.objects.get(registration=winner)
    assert (invitation.status, invitation.used_at, invitation.entry_id) == ("sent", None, None)
