from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from events.models import Event, EventControl
from queueing.line.index_sync import hot_index_rebuild


class Command(BaseCommand):
    help = "Rebuild the Redis hot index of on-sales from PostgreSQL (all open ones by default)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", help="on-sale slugs (default: all not closed)")

    def handle(self, *args: Any, slugs: list[str], **options: Any) -> None:
        events = (
            Event.objects.filter(slug__in=slugs)
            if slugs
            else Event.objects.exclude(control=EventControl.CLOSED)
        )
        missing = set(slugs) - {event.slug for event in events}
        if missing:
            raise CommandError(f"no such on-sale: {', '.join(sorted(missing))}")
        for event in events:
            if hot_index_rebuild(event_id=event.id):
                self.stdout.write(f"{event.slug}: rebuilt")
            else:
                raise CommandError(
                    f"{event.slug}: not rebuilt (Redis down or a rebuild is running)"
                )
