"""A local SMTP server for the tests that send mail (aiosmtpd, on a free loopback port)."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller

from tests.processes import free_port


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []

    # aiosmtpd calls its handlers by the SMTP verb: handle_DATA.
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        message["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
        self.messages.append(message)  # type: ignore[arg-type]
        return "250 OK"


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()
