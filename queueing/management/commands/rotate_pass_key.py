from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from queueing.passes.signing import KEY_PREPUBLISH, MAX_PASS_SECONDS, pass_key_rotate


class Command(BaseCommand):
    help = "Add a new pass-signing key: published now, signing after a delay."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--activate-in",
            type=int,
            default=int(KEY_PREPUBLISH.total_seconds()),
            help="seconds until it signs (let shops' JWKS caches pick it up first)",
        )

    def handle(self, *args: Any, activate_in: int, **options: Any) -> None:
        key = pass_key_rotate(now=timezone.now(), activate_in=timedelta(seconds=activate_in))
        self.stdout.write(
            f"key {key.kid} is published now and signs from {key.activates_at.isoformat()}; "
            f"the key it replaces stays published for {MAX_PASS_SECONDS} s after that"
        )
