from typing import Any

from django.core.management.base import BaseCommand

from queueing.passes.signing import pass_keys_reseal
from queueing.webhooks.secrets import endpoint_secrets_reseal


class Command(BaseCommand):
    help = (
        "Seal every pass-signing key and webhook endpoint secret again under the first "
        "WR_PASS_KEY_ENCRYPTION_KEY, so that the keys after it may be dropped "
        "(docs/configuration.md, rotating the encryption key)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        resealed = pass_keys_reseal()
        self.stdout.write(f"{resealed} pass-signing keys sealed under the first encryption key")
        endpoints = endpoint_secrets_reseal()
        self.stdout.write(f"{endpoints} webhook endpoints' secrets sealed under it too")
