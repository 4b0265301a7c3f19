"""Work the line asks the Celery workers to do soon: admit now (a slot freed), rebuild an
event's hot index (Redis lost it).

Sent by task name, so the line's services do not import the task layer above them
(``queueing/tasks.py`` declares its tasks under these same names).
"""

from __future__ import annotations

from celery import current_app

ADMISSION_FOR_EVENT = "queueing.tasks.admission_for_event"
HOT_INDEX_REBUILD = "queueing.tasks.hot_index_rebuild"
BROADCAST_FOR_EVENT = "queueing.tasks.broadcast_for_event"
TURN_MAILS_SEND = "queueing.tasks.turn_mails_send"
REGISTRATION_MAIL_SEND = "queueing.tasks.registration_mail_send"
DRAWS_RUN = "queueing.tasks.draws_run"
REGISTRATION_MAILS_SEND = "queueing.tasks.registration_mails_send"


def admission_soon(event_id: int) -> None:
    """Admit the next fans of the event now rather than at its next tick."""
    current_app.send_task(ADMISSION_FOR_EVENT, args=(event_id,))


def broadcast_soon(event_id: int) -> None:
    """Send the event's pages a tick now (staff changed what they show), not at the next beat."""
    current_app.send_task(BROADCAST_FOR_EVENT, args=(event_id,), expires=5)


def turn_mail_soon(entry_ids: list[int]) -> None:
    """Send these admitted fans the mail they asked for."""
    current_app.send_task(TURN_MAILS_SEND, args=(entry_ids,))


def registration_mail_soon(registration_id: str) -> None:
    """Mail a new registration its confirmation link."""
    current_app.send_task(REGISTRATION_MAIL_SEND, args=(registration_id,))


def draws_soon() -> None:
    """Run the draws due (and the invitations lapsed); a stale ask is dropped: the next
    dispatch asks again while any is due."""
    current_app.send_task(DRAWS_RUN, expires=5)


def registration_mails_soon(event_id: int) -> None:
    """Mail the on-sale's registrants what the draw (or a lapse) decided for them."""
    current_app.send_task(REGISTRATION_MAILS_SEND, args=(event_id,))


def rebuild_soon(event_id: int) -> None:
    """Rebuild the event's hot index from PostgreSQL."""
    current_app.send_task(HOT_INDEX_REBUILD, args=(event_id,))
