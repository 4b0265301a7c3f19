from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from queueing.passes import MAX_PASS_SECONDS, pass_key_rotate


class Command(BaseCommand):
    help = (
        "Start signing passes with a new key; the old one stays published until its passes expire."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        key = pass_key_rotate(now=timezone.now())
        self.stdout.write(
            f"signing with {key.kid}; retired keys stay in the JWKS for {MAX_PASS_SECONDS} s"
        )
