from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from dashboard.audit_verdicts import verdict_check
from events.models import Event


class Command(BaseCommand):
    help = (
        "Recompute an on-sale's whole audit trail (its hash chain, or every lane's and the root"
        " records over them), say whether it is intact, and keep the verdict for the auditors'"
        " page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: Any, slug: str, **options: Any) -> None:
        event = Event.objects.filter(slug=slug).first()
        if event is None:
            raise CommandError(f"no such on-sale: {slug}")
        # The whole chain, however long: a command has no request to keep short.
        verdict, _ = verdict_check(event, now=timezone.now(), from_start=True, limit=0)
        if verdict.ok:
            lanes = f" in {len(verdict.lanes)} lanes and the root chain" if verdict.lanes else ""
            self.stdout.write(f"{slug}: intact, {verdict.records} records{lanes}")
            return
        where = (
            f"first bad record id {verdict.first_bad_id}"
            if verdict.first_bad_id
            else ("records missing at the end of the chain")
        )
        if verdict.lanes:
            where += f": {verdict.problem}"
        raise CommandError(f"{slug}: TAMPERED ({where}; {verdict.records} records)")
