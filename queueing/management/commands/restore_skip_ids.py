from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from queueing.records.sequences import DEFAULT_GAP, sequences_skip_ahead


class Command(BaseCommand):
    help = (
        "On a restored database, before the room starts: move the entry and audit record id"
        " sequences past every id handed out between the backup point and the failure, so"
        " that no new fan is given the ticket of a fan whose join was lost."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--gap",
            type=int,
            default=DEFAULT_GAP,
            help="how far ahead (more than the ids the lost interval can have drawn)",
        )

    def handle(self, *args: Any, gap: int, **options: Any) -> None:
        for skipped in sequences_skip_ahead(gap=gap):
            self.stdout.write(f"{skipped.table}: ids went from {skipped.before} to {skipped.after}")
