from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.login_throttle import login_lockout_lift
from queueing.hot.client import HotIndexUnavailable


class Command(BaseCommand):
    help = (
        "End the login lockout of a staff account and/or a client address before it runs out "
        "(their failures are forgotten too)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", help="the account (username) to unlock")
        parser.add_argument("--address", help="the client address to unlock (IPv6: its /64)")

    def handle(self, *args: Any, username: str | None, address: str | None, **options: Any) -> None:
        if username is None and address is None:
            raise CommandError("give --username, --address, or both")
        try:
            lifted = login_lockout_lift(username=username, address=address)
        except HotIndexUnavailable as exc:
            raise CommandError(f"Redis unreachable: {exc}") from exc
        self.stdout.write(
            "lifted: " + ", ".join(lifted)
            if lifted
            else "no lockout was running; failures forgotten"
        )
