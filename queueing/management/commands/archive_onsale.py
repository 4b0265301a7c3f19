"""``manage.py archive_onsale <slug> [--out PATH] [--dry-run]``: an ended on-sale's entries
and audit trail to one verifiable file, then out of the database (queueing/line/archives.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from events.models import Event
from queueing.line.archives import ArchiveRefused, archive_path, onsale_archive


class Command(BaseCommand):
    help = (
        "Archive an ended on-sale: write its entries and audit trail to a compressed file "
        "(docs/archive-format.md), check it, then remove them from the database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the on-sale's slug")
        parser.add_argument(
            "--out",
            type=Path,
            help="the file to write (default: <slug>-<id>-<time>.jsonl.gz in WR_ARCHIVE_DIR)",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="write and check the file, but remove nothing and leave the on-sale as it is",
        )

    def handle(self, *args: Any, slug: str, out: Path | None, dry_run: bool, **_: Any) -> None:
        event = Event.objects.filter(slug=slug).first()
        if event is None:
            raise CommandError(f"no such on-sale: {slug}")
        now = timezone.now()
        path = out or archive_path(event, now=now, directory=Path(settings.WR_ARCHIVE_DIR))
        try:
            archived = onsale_archive(event_id=event.id, now=now, out=path, dry_run=dry_run)
        except ArchiveRefused as refused:
            raise CommandError(str(refused)) from None
        root = archived.heads.get("root", {})
        self.stdout.write(
            f"{slug}: {archived.records} audit records and {archived.entries} entries in "
            f"{archived.path}\n  sha256 {archived.sha256}\n"
            f"  root chain ends at seq {root.get('seq')}, hash {root.get('hash')}"
        )
        if archived.removed is None:
            self.stdout.write("  dry run: nothing removed, the on-sale is not marked archived")
            return
        removed = archived.removed
        self.stdout.write(
            f"  removed {removed.entries} entries, {removed.records} audit records and "
            f"{removed.place_links} place links; "
            + (
                "Redis did not answer: its keys stay until it does"
                if archived.keys_dropped is None
                else f"{archived.keys_dropped} Redis keys dropped"
            )
        )
