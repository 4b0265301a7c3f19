from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard.restore_checks import restore_report


class Command(BaseCommand):
    help = (
        "Check a restored database before the room serves from it: every on-sale's entries by"
        " status and whole audit trail, and every pass-signing key. Writes nothing; fails"
        " when a trail does not recompute or a key does not sign."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = restore_report(now=timezone.now())
        for sale in report.on_sales:
            entries = ", ".join(f"{n} {status}" for status, n in sale.entries.items()) or "none"
            chain = "intact" if sale.chain_ok else f"BROKEN ({sale.problem})"
            self.stdout.write(
                f"on-sale {sale.slug}: entries {entries}; trail {chain}, {sale.records} records"
            )
        for key in report.keys:
            verdict = "signs and verifies" if key.signs else f"DOES NOT SIGN ({key.problem})"
            self.stdout.write(f"pass key {key.kid}: {verdict}")
        if not report.keys:
            self.stdout.write("no pass-signing key yet: the room makes one when it first signs")
        if not report.ok:
            raise CommandError("the restore is not fit to serve")
        self.stdout.write(
            f"restore ok: {len(report.on_sales)} on-sales, {len(report.keys)} pass keys"
        )
