"""An ended on-sale archived: its entries and audit trail written to one file anyone can
verify (docs/archive-format.md), then removed from the database and the hot index.

The order is what makes it safe to delete:

1. refuse unless the on-sale has ended (closed, sold out, or past its end) with nobody left
   in line or in the shop, and its trail verifies in the room (``audit_event_verify``);
2. an on-sale with lanes gets a last root record first, so that the root chain's last hash
   vouches for every lane's last record: that one hash is then the whole trail's;
3. the file is written under a temporary name, flushed and fsync'ed, read back and checked
   (digest, counts, every hash and link, the heads the database holds), and only then
   renamed to its name (and the directory fsync'ed);
4. under every chain head's lock, the heads must still be the ones archived; the on-sale is
   marked archived in that transaction (``archived_at`` and ``archive``: the file's digest,
   its counts and the final heads);
5. then the rows go, a batch at a time (``records/archive_rows.py``), and the hot index's keys.

A run cut short after step 4 is finished by the next (the on-sale says archived, its rows
are removed); before it, nothing was removed, and a ``.partial`` file may be left behind.
Two runs for one on-sale do not overlap: each holds a session advisory lock on it.

Over 350 lines on purpose: the file written and the room's reading of it back
(``archive_file_problem``) are one byte layout, which must change together.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import connection, transaction

from events.models import Event, EventState
from queueing.hot.client import answered
from queueing.hot.forget import event_keys_forget
from queueing.models import GENESIS_HASH, QueueEntry, RegistrationWindow
from queueing.records.archive_rows import (
    ENTRY_KEYS,
    Heads,
    Removed,
    archived_rows_delete,
    chain_heads,
    entry_rows,
    status_counts,
    trail_rows,
)
from queueing.records.audit import canonical_json, canonical_record, chain_hash, hashed_at
from queueing.records.audit_roots import audit_root_write
from queueing.records.audit_verify import audit_event_verify
from queueing.rules.states import LIVE

logger = logging.getLogger(__name__)

ARCHIVE_FORMAT = 1
ARCHIVE_KIND = "waitingroom.archive"
# First key of the two-int session advisory lock held while an on-sale is archived.
ARCHIVE_LOCK_NAMESPACE = 0x5741

# The on-sale's settings as the header keeps them: what decided who went in when. Its secrets
# (integration key, Queue-it secret key) and access codes are left out.
EVENT_FIELDS = (
    "id",
    "queue_order",
    "slug",
    "name",
    "target_url",
    "capacity",
    "rate_per_minute",
    "session_seconds",
    "heartbeat_seconds",
    "away_seconds",
    "lanes",
    "max_queue_length",
    "max_wait_seconds",
    "max_live_per_address",
    "prequeue_opens_at",
    "starts_at",
    "ends_at",
    "pow_difficulty",
    "shuffle_at_start",
    "mode",
    "reentry_seconds",
    "control",
    "created_at",
    "started_at",
    "closed_at",
    "sold_out_at",
)


class ArchiveRefused(Exception):
    """The on-sale cannot be archived now; the message says why, for staff."""


@dataclass(frozen=True)
class Archived:
    path: Path
    sha256: str
    records: int
    entries: int
    heads: dict[str, Any]
    # None for a dry run (nothing removed), or a run that found the rows gone already.
    removed: Removed | None = None
    keys_dropped: int | None = None  # None: Redis did not answer (the keys stay)


def archive_refusal(event: Event, *, now: datetime) -> str:
    """Why ``event`` cannot be archived at ``now`` ("" when it can)."""
    if event.archived_at is not None:
        return f"{event.slug} was archived at {event.archived_at.isoformat()}."
    state = event.state_at(now)
    if state != EventState.CLOSED:
        return (
            f"{event.slug} has not ended (it is {state.label.lower()}): only an on-sale that "
            "is closed, sold out or past its end can be archived."
        )
    live = QueueEntry.objects.filter(event_id=event.id, status__in=LIVE).count()
    if live:
        return (
            f"{event.slug} still has {live} fan(s) in line or in the shop: archive it once "
            "their tickets have ended (a closed line is revoked by its ticks, a session ends "
            "when its pass expires)."
        )
    return ""


def archive_described(event: Event) -> dict[str, Any] | None:
    """What the room still says of an archived on-sale's trail (None while it has its rows):
    when, the file's digest, its counts and the chains' last heads, to compare with the
    file's own (scripts/verify_trail.py prints them)."""
    if event.archived_at is None:
        return None
    kept = event.archive or {}
    return {
        "archived_at": event.archived_at.isoformat(),
        "sha256": kept.get("sha256", ""),
        "records": kept.get("records", 0),
        "entries": kept.get("entries", 0),
        "heads": kept.get("heads", {}),
        "format": kept.get("format", ARCHIVE_FORMAT),
    }


def archive_path(event: Event, *, now: datetime, directory: Path) -> Path:
    return directory / f"{event.slug}-{event.id}-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}.jsonl.gz"


def onsale_archive(*, event_id: int, now: datetime, out: Path, dry_run: bool = False) -> Archived:
    """Archive the ended on-sale ``event_id`` to ``out`` (module docstring). ``dry_run``:
    write and check the file, remove and mark nothing. Raises ``ArchiveRefused``."""
    with _archive_lock(event_id):
        event = Event.objects.get(pk=event_id)
        if event.archived_at is not None and not dry_run:
            return _finish(event)
        refusal = archive_refusal(event, now=now)
        if refusal:
            raise ArchiveRefused(refusal)
        # The last lane records under a root, so the root chain's head vouches for all.
        audit_root_write(event_id=event_id, now=now)
        verdict = audit_event_verify(event_id=event_id)
        if not verdict.ok:
            raise ArchiveRefused(
                f"{event.slug}'s audit trail does not verify in the room "
                f"({verdict.problem or 'a record is wrong'}): it is kept as it is, for you to "
                "look into; nothing was archived."
            )
        heads = chain_heads(event_id=event_id)
        if heads is None:
            raise ArchiveRefused(f"{event.slug} has no audit chain to archive.")
        written = _write(event, heads=heads, now=now, out=out)
        if dry_run:
            return written
        _mark(event, heads=heads, written=written, now=now)
        event.refresh_from_db()
        return _finish(event)


def archive_removal_finish(*, event_id: int) -> Archived:
    """Finish removing the rows and keys of an on-sale already marked archived (a run cut
    short after step 4)."""
    with _archive_lock(event_id):
        return _finish(Event.objects.get(pk=event_id, archived_at__isnull=False))


def _finish(event: Event) -> Archived:
    """The rows and keys of an on-sale marked archived removed (again: idempotent)."""
    removed = archived_rows_delete(event_id=event.id)
    done, dropped = answered(event_keys_forget, event.id, lanes=event.lanes)
    if not done:
        logger.warning("archived on-sale %s: Redis did not answer, its keys stay", event.id)
    archive = event.archive or {}
    return Archived(
        path=Path(archive.get("file", "")),
        sha256=archive.get("sha256", ""),
        records=archive.get("records", 0),
        entries=archive.get("entries", 0),
        heads=archive.get("heads", {}),
        removed=removed,
        keys_dropped=dropped,
    )


@contextmanager
def _archive_lock(event_id: int) -> Iterator[None]:
    """A session advisory lock on the on-sale for the whole run (its own transactions
    commit inside it); refused, not waited for, when another run holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [ARCHIVE_LOCK_NAMESPACE, event_id])
        (taken,) = cursor.fetchone()
    if not taken:
        raise ArchiveRefused("another run is archiving this on-sale right now.")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [ARCHIVE_LOCK_NAMESPACE, event_id])


# ------------------------------------------------------------------ the file


def _event_settings(event: Event) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for name in EVENT_FIELDS:
        value = getattr(event, name)
        settings[name] = hashed_at(value) if isinstance(value, datetime) else value
    # Published as the on-sale's API does (an archived on-sale has closed): the shuffle, and a
    # random line's order, can be redone.
    settings["shuffle_seed"] = event.shuffle_seed_revealed(closed=True)
    settings["shuffle_seed_sha256"] = event.shuffle_seed_sha256
    window = RegistrationWindow.objects.filter(event=event).first()
    drawn = window is not None and window.drawn_at is not None
    # As the report and the draw's API reveal it: with the draw, never before (an on-sale
    # that ended undrawn keeps it secret, its SHA-256 a commitment to nothing yet used).
    settings["draw_seed"] = event.draw_seed if drawn else None
    settings["draw_seed_sha256"] = event.draw_seed_sha256
    settings["registration_window"] = None if window is None else _window_settings(window)
    settings["tiers"] = [
        {"id": t.id, "name": t.name, "priority": t.priority, "share": t.share,
         "is_default": t.is_default}
        for t in event.tiers.order_by("priority", "id")
    ]  # fmt: skip
    return settings


def _window_settings(window: RegistrationWindow) -> dict[str, Any]:
    """The draw's window and what it drew; never its shop key nor its identity key."""
    return {
        "opens_at": hashed_at(window.opens_at),
        "closes_at": hashed_at(window.closes_at),
        "winners": window.winners,
        "waitlist": window.waitlist,
        "invitation_hours": window.invitation_hours,
        "drawn_at": hashed_at(window.drawn_at) if window.drawn_at is not None else None,
        "list_root": window.list_root,
        "list_count": window.list_count,
    }


def _lines(event: Event, *, heads: Heads, now: datetime) -> Iterator[dict[str, Any]]:
    counts = status_counts(event_id=event.id)
    yield {
        "archive": {
            "kind": ARCHIVE_KIND,
            "format": ARCHIVE_FORMAT,
            "archived_at": hashed_at(now),
            "event": _event_settings(event),
            "entries_by_status": counts,
            "heads": heads.as_json(),
        }
    }
    for record in trail_rows(event_id=event.id, slug=event.slug):
        yield {"record": record}
    for entry in entry_rows(event_id=event.id):
        yield {"entry": entry}


def _write(event: Event, *, heads: Heads, now: datetime, out: Path) -> Archived:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    digest = hashlib.sha256()
    records = entries = 0
    try:
        with open(partial, "wb") as raw:
            # mtime 0: the same contents make the same bytes, whenever they are written; level
            # 6, as gzip's own default: 9 costs several times the time for a few per cent.
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as packed:
                for line in _lines(event, heads=heads, now=now):
                    records += "record" in line
                    entries += "entry" in line
                    text = (canonical_json(line) + "\n").encode()
                    digest.update(text)
                    packed.write(text)
                end = {"records": records, "entries": entries, "sha256": digest.hexdigest()}
                packed.write((canonical_json({"end": end}) + "\n").encode())
            raw.flush()
            os.fsync(raw.fileno())
        problem = archive_file_problem(
            partial, heads=heads.as_json(), records=records, entries=entries
        )
        if problem:
            raise ArchiveRefused(f"the archive written did not read back whole: {problem}")
        os.replace(partial, out)
        _fsync_directory(out.parent)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return Archived(
        path=out,
        sha256=digest.hexdigest(),
        records=records,
        entries=entries,
        heads=heads.as_json(),
    )


def _fsync_directory(directory: Path) -> None:
    """The rename made durable: the directory's entry, not only the file's bytes."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _mark(event: Event, *, heads: Heads, written: Archived, now: datetime) -> None:
    with transaction.atomic():
        # Every head locked in the appends' order: nothing can be appended meanwhile, and
        # what was archived must still be all there is.
        if chain_heads(event_id=event.id, lock=True) != heads:
            written.path.unlink(missing_ok=True)
            raise ArchiveRefused(
                f"{event.slug}'s audit trail grew while it was archived: run the archive again."
            )
        marked = Event.objects.filter(pk=event.id, archived_at__isnull=True).update(
            archived_at=now,
            archive={
                "file": str(written.path),
                "sha256": written.sha256,
                "records": written.records,
                "entries": written.entries,
                "heads": written.heads,
                "format": ARCHIVE_FORMAT,
            },
        )
        if not marked:
            raise ArchiveRefused(f"{event.slug} was archived by another run meanwhile.")


# ------------------------------------------------------------------ reading one back


def _archive_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with gzip.open(path, "rb") as packed:
        yield from enumerate(packed, start=1)


def archive_file_problem(path: Path, *, heads: dict[str, Any], records: int, entries: int) -> str:
    """What is wrong with the archive at ``path`` ("" when nothing): the room's own reading
    before anything is removed. Its digest and counts, each record's hash, link and seq from
    its chain's start, each chain's end against ``heads`` (the database's), and entries
    keeping only the archived fields. (The outsider's check, with the root records' Merkle
    roots, is scripts/verify_trail.py's.)"""
    try:
        return _problem(_archive_lines(path), heads=heads, records=records, entries=entries)
    except (OSError, EOFError, ValueError) as exc:
        return f"unreadable ({exc})"


def _problem(
    lines: Iterable[tuple[int, bytes]], *, heads: dict[str, Any], records: int, entries: int
) -> str:
    digest = hashlib.sha256()
    chains: dict[Any, tuple[int, str]] = {}
    seen = {"record": 0, "entry": 0}
    end: dict[str, Any] | None = None
    for number, text in lines:
        if end is not None:
            return f"line {number} follows the end line"
        line = json.loads(text)
        if "end" in line:
            end = line["end"]
            continue
        digest.update(text)
        if number == 1:
            header = line.get("archive") or {}
            if header.get("heads") != heads:
                return "its header's heads are not the database's"
            continue
        if "record" in line:
            problem = _record_problem(line["record"], chains)
            if problem:
                return f"line {number}: {problem}"
        elif "entry" in line:
            if set(line["entry"]) != set(ENTRY_KEYS):
                return f"line {number}: an entry with other fields than the archived ones"
        else:
            return f"line {number} is neither a record nor an entry"
        seen["record" if "record" in line else "entry"] += 1
    if end is None:
        return "no end line"
    if end != {"records": records, "entries": entries, "sha256": digest.hexdigest()}:
        return "its end line's counts or digest are not what was written"
    if seen != {"record": records, "entry": entries}:
        return f"{seen['record']} records and {seen['entry']} entries, not {records} and {entries}"
    ends = {None: (heads["root"]["seq"], heads["root"]["hash"])}
    ends.update({h["lane"]: (h["seq"], h["hash"]) for h in heads["lanes"]})
    for lane, (seq, last) in ends.items():
        if chains.get(lane, (0, GENESIS_HASH)) != (seq, last):
            return f"the chain {'root' if lane is None else f'of lane {lane}'} ends elsewhere"
    return ""


def _record_problem(record: dict[str, Any], chains: dict[Any, tuple[int, str]]) -> str:
    lane = record["lane"]
    seq, prev = chains.get(lane, (0, GENESIS_HASH))
    if record["seq"] != seq + 1 or record["prev_hash"] != prev:
        return f"seq {record['seq']} does not follow seq {seq} of its chain"
    canonical = canonical_record(
        event_id=record["event_id"],
        seq=record["seq"],
        at=datetime.fromisoformat(record["at_hashed"]),
        ticket_id=uuid.UUID(record["ticket_id"]) if record["ticket_id"] else None,
        action=record["action"],
        actor=record["actor"],
        data=record["data"],
        lane=lane,
    )
    if chain_hash(record["prev_hash"], canonical) != record["hash"]:
        return f"the record at seq {record['seq']} does not hash to its hash"
    chains[lane] = (record["seq"], record["hash"])
    return ""
