from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from events.models import Event
from queueing.records.audit import audit_chain_verify


class Command(BaseCommand):
    help = "Recompute an on-sale's audit hash chain and say whether it is intact."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: Any, slug: str, **options: Any) -> None:
        event = Event.objects.filter(slug=slug).first()
        if event is None:
            raise CommandError(f"no such on-sale: {slug}")
        verdict = audit_chain_verify(event_id=event.id)
        if verdict.ok:
            self.stdout.write(f"{slug}: intact, {verdict.records} records")
            return
        where = (
            f"first bad record id {verdict.first_bad_id}"
            if verdict.first_bad_id
            else ("records missing at the end of the chain")
        )
        raise CommandError(f"{slug}: TAMPERED ({where}; {verdict.records} records)")
