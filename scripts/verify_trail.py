#!/usr/bin/env python3
"""Check an export of the waiting room's audit trail without trusting the room.

    python3 verify_trail.py FILE        (FILE may be - for standard input)

FILE is what the auditors' API gave (docs/api.md, "Auditors"): its JSON pages, several of them
one after the other as ``curl ... >> trail.json`` leaves them, a JSON array of records, JSON
lines (a record a line), or its CSV export. Every record is recomputed by the rule in
docs/api.md ("The canonical form"):

    hash = sha256(prev_hash + canonical JSON of the record)

and its chain is followed: a chain is one on-sale's records (``event_id``), or one lane of
them where records carry a ``lane``. Records of different chains may interleave in the file;
within a chain they must come in order. Exit status:

    0  every hash, every link (prev_hash = the hash of the chain's record before it in the
       file) and every seq (no gap, no repeat, up by one) holds;
    1  not so: the first bad record is named (its id and seq) with what failed;
    2  bad usage, a file that cannot be read or holds no records.

Records of an on-sale with lanes are chained per lane, and its root chain (the records with no
lane) holds ``root`` records, each listing every lane's head (lane, seq, hash) and a Merkle
root over them (docs/api.md, "Root records"). Each root's Merkle root is recomputed from the
heads it lists, no lane may go back from one root to the next, and every head it lists must
be the record the file holds for that lane and seq: a lane cut short or rewritten behind a
root fails here, though the lane's own chain may look whole.

A chain whose first record in the file has seq 1 is checked from the chain's start (its
prev_hash must be 64 zeros). One that starts later (an export from a time, or the later pages
of a long trail) is checked from its first record in the file: that record's own hash is
recomputed, but its prev_hash links to a record the file does not hold, so it is taken as
given, and the output says so. What the file cannot show is a chain cut short at its end:
compare the last seq and hash printed with what the room reports.

FILE may also be an archive of an ended on-sale (``manage.py archive_onsale``; its format is
docs/archive-format.md), told by its gzip header: then every chain must be whole, from seq 1
to the head the archive's header lists (with lanes, the last root record must list every
lane's last record), its entries must keep only the archived fields, and its end line's counts
and SHA-256 of every line before it must hold. The digest and root chain head printed are what
the room keeps of the archived on-sale: compare them.

``--seed SEED`` (an on-sale in ``random`` queue order, its seed revealed once it closed:
docs/api.md, "Random order") also checks the order: the seed is the one committed to (its
SHA-256 is the ``shuffle_seed_sha256`` of the on-sale's ``event_created`` record), each first
``admitted`` record's ``order_key`` is the place ``sha256(seed + ":" + ticket_id)`` gives
(first 52 bits), and within each admission run (one ``at``) each tier went in lowest place
first. Whom a run had to be ahead of among the fans still waiting needs the entries' ids,
which the trail does not hold: the room's report (``order_inversions``) checks that.

Only Python's standard library is used, so this file runs on its own, anywhere with Python
3.9 or later. Over 350 lines on purpose: one file to copy anywhere, nothing to install.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import sys
import zlib
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any, NamedTuple

GENESIS_HASH = "0" * 64
# What every record must carry; ``lane`` is optional (and hashed when present).
REQUIRED = ("event_id", "seq", "at_hashed", "ticket_id", "action", "actor", "data")
CHAINED = ("prev_hash", "hash")
READ_CHUNK = 1 << 20


class BadInput(Exception):
    """The file is not an export of the trail at all (exit 2)."""


class Record(NamedTuple):
    where: str  # how the output names it: its id, or its place in the file
    fields: dict[str, Any]


# A root lists each lane's head as committed; the lane's records inserted but not yet
# committed then may come before the root in the file. Their hashes are kept for as many
# records per lane, so that a root can be checked against the head it lists.
RECENT_PER_LANE = 20_000


class Chain:
    def __init__(self, first_seq: int) -> None:
        self.first_seq = first_seq
        self.last_seq = first_seq
        self.last_hash = ""
        self.count = 0
        self.recent: dict[int, str] = {}  # a lane's last records: seq -> hash

    def keep(self, seq: int, digest: str) -> None:
        self.recent[seq] = digest
        if len(self.recent) > RECENT_PER_LANE:
            del self.recent[next(iter(self.recent))]  # the oldest (dicts keep their order)


ChainKey = tuple[int, "str | None"]


class Roots:
    """What the root records of the file say about the lanes, checked as the file goes."""

    def __init__(self) -> None:
        self.count = 0
        self.matched = 0  # listed heads found in the file, with the hash listed
        self.unchecked = 0  # listed heads whose records the file does not hold
        # Heads listed beyond what the file held so far: (chain, seq) -> (root, hash).
        self.pending: dict[tuple[ChainKey, int], tuple[str, str]] = {}
        self.last_listed: dict[ChainKey, int] = {}


def canonical(fields: dict[str, Any]) -> str:
    """The record as the room hashed it: the API's ``event_id`` and ``at_hashed`` under the
    names ``event`` and ``at``, keys sorted, no spaces, non-ASCII characters as themselves."""
    hashed: dict[str, Any] = {
        "action": fields["action"],
        "actor": fields["actor"],
        "at": fields["at_hashed"],
        "data": fields["data"],
        "event": fields["event_id"],
        "seq": fields["seq"],
        "ticket_id": fields["ticket_id"],
    }
    if fields.get("lane") is not None:
        hashed["lane"] = fields["lane"]
    return json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_hash(fields: dict[str, Any]) -> str:
    return hashlib.sha256((fields["prev_hash"] + canonical(fields)).encode()).hexdigest()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def merkle_root(heads: list[dict[str, Any]]) -> str:
    """docs/api.md, "Root records": a leaf per lane, sha256("leaf:<lane>:<seq>:<hash>"), in
    the order listed (ascending lanes); each level pairs them from the left, a node being
    sha256 of the two hex digests one after the other, and an odd last one goes up as it is."""
    level = [
        _sha256(f"leaf:{json.dumps(h['lane'], ensure_ascii=False)}:{h['seq']}:{h['hash']}")
        for h in heads
    ]
    while len(level) > 1:
        paired = [_sha256(level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


# Reading the file.


def _json_values(stream: IO[str]) -> Iterator[Any]:
    """Each JSON value of a file that holds one or more one after the other (pages appended
    by curl, JSON lines), read a piece at a time: a long trail need not fit in memory, only
    its largest value."""
    decoder = json.JSONDecoder()
    buffer, position, ended = "", 0, False
    while True:
        while position < len(buffer) and buffer[position].isspace():
            position += 1
        if position == len(buffer):
            if ended:
                return
            buffer, position = stream.read(READ_CHUNK), 0
            ended = not buffer
            continue
        try:
            value, end = decoder.raw_decode(buffer, position)
        except json.JSONDecodeError as exc:
            if ended:
                raise BadInput(f"not JSON at character {exc.pos}: {exc.msg}") from None
            # Perhaps cut off at the piece's end: read at least as much again and retry.
            more = stream.read(max(READ_CHUNK, len(buffer) - position))
            buffer, position = buffer[position:] + more, 0
            ended = not more
            continue
        if end == len(buffer) and not ended and not isinstance(value, (dict, list)):
            # A number or word may go on in the next piece.
            more = stream.read(READ_CHUNK)
            if more:
                buffer, position = buffer[position:] + more, 0
                continue
            ended = True
        yield value
        position = end


def _json_records(stream: IO[str]) -> Iterator[Record]:
    number = 0
    for value in _json_values(stream):
        if isinstance(value, dict) and isinstance(value.get("results"), list):
            items = value["results"]  # a page of the API
        elif isinstance(value, list):
            items = value  # an array of records (or of pages)
        elif isinstance(value, dict):
            items = [value]  # a JSON line
        else:
            raise BadInput("a JSON value that is neither a page, an array nor a record")
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("results"), list):
                pages = item["results"]
            else:
                pages = [item]
            for one in pages:
                number += 1
                if not isinstance(one, dict):
                    raise BadInput(f"record {number} of the file is not a JSON object")
                yield Record(_name(one, f"record {number} of the file"), one)


def _csv_records(stream: IO[str]) -> Iterator[Record]:
    reader = csv.DictReader(stream)
    columns = set(reader.fieldnames or [])
    missing = [c for c in (*REQUIRED, *CHAINED) if c not in columns]
    if missing:
        raise BadInput(
            "not the trail's CSV export (or one from before it carried what the hash covers):"
            f" no column {', '.join(missing)}"
        )
    for row in reader:
        where = f"line {reader.line_num} of the file"
        fields: dict[str, Any] = dict(row)
        for name in ("event_id", "seq"):
            fields[name] = _integer(row[name])
        fields["ticket_id"] = row["ticket_id"] or None
        fields["data"] = _json_cell(row["data"])
        # The lane, like ``data``, is JSON in its cell (so 1 and "1" stay apart); empty: none.
        fields["lane"] = _json_cell(row["lane"]) if row.get("lane") else None
        yield Record(_name(fields, where), fields)


def _integer(text: str | None) -> Any:
    try:
        return int(text or "")
    except ValueError:
        return text  # left for the record's check to refuse, naming the record


class _Unreadable:
    """A cell that is not JSON: no record holding it can verify."""

    def __init__(self, text: str) -> None:
        self.text = text


def _json_cell(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):  # TypeError: a row short of this cell
        return _Unreadable(text)


def _name(fields: dict[str, Any], where: str) -> str:
    parts = []
    if "id" in fields and fields["id"] not in (None, ""):
        parts.append(f"id {fields['id']}")
    if "seq" in fields:
        parts.append(f"seq {fields['seq']}")
    if fields.get("lane") is not None:
        parts.append(f"lane {json.dumps(fields['lane'], ensure_ascii=False)}")
    return f"record {', '.join(parts)} ({where})" if parts else f"{where}"


def records_of(stream: IO[str]) -> Iterator[Record]:
    """JSON or CSV, told apart by the first character that is not a space."""
    start = stream.read(1)
    while start and start.isspace():
        start = stream.read(1)
    if not start:
        return iter(())
    rest = _Prefixed(start, stream)
    return _json_records(rest) if start in "{[" else _csv_records(rest)


class _Prefixed(io.TextIOBase):
    """A stream with its first character put back."""

    def __init__(self, first: str, stream: IO[str]) -> None:
        self.first, self.stream = first, stream

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        head, self.first = self.first, ""
        if size is None or size < 0:
            return head + self.stream.read()
        return head + self.stream.read(max(size - len(head), 0))

    def readline(self, size: int | None = -1) -> str:
        head, self.first = self.first, ""
        return head + self.stream.readline()

    def __iter__(self) -> Iterator[str]:
        while True:
            line = self.readline()
            if not line:
                return
            yield line


# Checking.


def _shape_problem(fields: dict[str, Any]) -> str:
    missing = [name for name in (*REQUIRED, *CHAINED) if name not in fields]
    if missing:
        return f"it has no {', '.join(missing)}"
    for name in ("event_id", "seq"):
        if type(fields[name]) is not int:
            return f"its {name} is not a whole number"
    if fields["seq"] < 1:
        return "its seq is below 1"
    for name in ("at_hashed", "action", "actor", *CHAINED):
        if not isinstance(fields[name], str):
            return f"its {name} is not text"
    if not (fields["ticket_id"] is None or isinstance(fields["ticket_id"], str)):
        return "its ticket_id is neither text nor null"
    if isinstance(fields["data"], _Unreadable) or isinstance(fields.get("lane"), _Unreadable):
        return "a cell that should hold JSON does not"
    return _time_problem(fields)


def _time_problem(fields: dict[str, Any]) -> str:
    """``at`` is shown for people and not hashed as such: it must be the hashed time."""
    try:
        hashed = datetime.fromisoformat(fields["at_hashed"])
    except ValueError:
        return "its at_hashed is not an ISO 8601 time"
    if "at" not in fields:
        return ""
    try:
        shown = datetime.fromisoformat(str(fields["at"]).replace("Z", "+00:00"))
    except ValueError:
        return "its at is not an ISO 8601 time"
    if hashed.tzinfo is None or shown.tzinfo is None or shown != hashed:
        return "its at is not the time at_hashed holds"
    return ""


def _chain_key(fields: dict[str, Any]) -> ChainKey:
    lane = fields.get("lane")
    return fields["event_id"], None if lane is None else json.dumps(lane, ensure_ascii=False)


def _chain_name(key: ChainKey) -> str:
    event_id, lane = key
    return f"on-sale {event_id}" + ("" if lane is None else f" lane {lane}")


class Checked(NamedTuple):
    """What a file's records were found to hold, every check having passed."""

    total: int
    chains: dict[ChainKey, Chain]
    roots: Roots


def verify(records: Iterator[Record], out: IO[str]) -> int:
    """0 when everything holds, 1 at the first record that does not (printed to ``out``)."""
    checked = check(records, out)
    if checked is None:
        return 1
    report(checked, out)
    print(
        "A chain cut short at its end cannot be seen in the file: compare each last seq and"
        " hash with what the room reports.",
        file=out,
    )
    return 0


def check(records: Iterator[Record], out: IO[str]) -> Checked | None:
    """Every record's hash, link and seq, and every root record; None after printing the
    first that fails."""
    chains: dict[ChainKey, Chain] = {}
    roots = Roots()
    total = 0
    for record in records:
        fields = record.fields
        problems = [_shape_problem(fields)]
        if not problems[0]:
            problems = _record_problems(fields, chains.get(_chain_key(fields)))
        if not problems and _is_root(fields):
            problems = _root_problems(record, chains, roots)
        if problems:
            print(f"FAILED at {record.where}: {'; '.join(problems)}.", file=out)
            print(f"{total} records before it held.", file=out)
            return None
        key = _chain_key(fields)
        chain = chains.setdefault(key, Chain(fields["seq"]))
        chain.last_seq, chain.last_hash = fields["seq"], fields["hash"]
        chain.count += 1
        total += 1
        if key[1] is not None:
            chain.keep(fields["seq"], fields["hash"])
            listed = roots.pending.pop((key, fields["seq"]), None)
            if listed is not None:
                if listed[1] != fields["hash"]:
                    print(
                        f"FAILED at {listed[0]}: the hash it lists for {_chain_name(key)} at seq"
                        f" {fields['seq']} is not that record's ({record.where}).",
                        file=out,
                    )
                    return None
                roots.matched += 1
    if not total:
        raise BadInput("no audit records in the file")
    for (key, seq), (where, _) in roots.pending.items():
        chain = chains.get(key)
        if chain is None:
            roots.unchecked += 1
            continue
        print(
            f"FAILED at {where}: it lists {_chain_name(key)} at seq {seq}, beyond that lane's"
            f" last record in the file (seq {chain.last_seq}): records cut from the lane's end,"
            " or a file that stops before them.",
            file=out,
        )
        return None
    return Checked(total=total, chains=chains, roots=roots)


def report(checked: Checked, out: IO[str]) -> None:
    total, chains, roots = checked
    print(
        f"OK: {total} records in {len(chains)} chain(s); every hash, link and seq holds.", file=out
    )
    for key, chain in sorted(chains.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        start = (
            "from the chain's start"
            if chain.first_seq == 1
            else (
                f"from seq {chain.first_seq}: the records before it are not in the file, so its"
                " prev_hash is taken as given"
            )
        )
        print(
            f"  {_chain_name(key)}: seq {chain.first_seq} to {chain.last_seq}, {start};"
            f" last hash {chain.last_hash}",
            file=out,
        )
    if roots.count:
        print(
            f"  {roots.count} root record(s): every Merkle root holds over the heads it lists;"
            f" {roots.matched} listed head(s) are the file's records with those hashes,"
            f" {roots.unchecked} not in the file (not checked).",
            file=out,
        )


def _is_root(fields: dict[str, Any]) -> bool:
    return fields["action"] == "root" and fields.get("lane") is None


def _listed_heads(data: Any) -> list[dict[str, Any]] | None:
    lanes = data.get("lanes") if isinstance(data, dict) else None
    if not isinstance(lanes, list) or not lanes or not isinstance(data.get("merkle_root"), str):
        return None
    for head in lanes:
        if not (
            isinstance(head, dict)
            and "lane" in head
            and type(head.get("seq")) is int
            and head["seq"] >= 0
            and isinstance(head.get("hash"), str)
        ):
            return None
    return lanes


def _root_problems(record: Record, chains: dict[ChainKey, Chain], roots: Roots) -> list[str]:
    """A root record (its own hash and link already checked) against the lanes it lists."""
    fields = record.fields
    heads = _listed_heads(fields["data"])
    if heads is None:
        return ["it is a root record, but its data is not a list of lane heads and a merkle_root"]
    if merkle_root(heads) != fields["data"]["merkle_root"]:
        return ["its merkle_root is not the Merkle root over the lane heads it lists"]
    roots.count += 1
    for head in heads:
        key: ChainKey = (fields["event_id"], json.dumps(head["lane"], ensure_ascii=False))
        seq, listed = head["seq"], head["hash"]
        if seq < roots.last_listed.get(key, 0):
            return [f"it lists {_chain_name(key)} at seq {seq}, behind the root before it"]
        roots.last_listed[key] = seq
        chain = chains.get(key)
        if seq == 0:
            if listed != GENESIS_HASH:
                return [f"it lists {_chain_name(key)} empty (seq 0) with a hash not 64 zeros"]
        elif chain is not None and seq in chain.recent:
            if chain.recent[seq] != listed:
                name = _chain_name(key)
                return [f"the hash it lists for {name} at seq {seq} is not that record's"]
            roots.matched += 1
        elif chain is not None and seq <= chain.last_seq:
            roots.unchecked += 1  # before the file's first record of the lane, or long ago
        else:
            roots.pending[(key, seq)] = (record.where, listed)
    return []


def _record_problems(fields: dict[str, Any], chain: Chain | None) -> list[str]:
    problems = []
    if record_hash(fields) != fields["hash"]:
        problems.append("its hash is not sha256(prev_hash + its canonical JSON)")
    seq = fields["seq"]
    if chain is None:
        if seq == 1 and fields["prev_hash"] != GENESIS_HASH:
            problems.append("it is its chain's first record (seq 1) but prev_hash is not 64 zeros")
        return problems
    if seq == chain.last_seq:
        problems.append(f"seq {seq} repeats")
    elif seq < chain.last_seq:
        problems.append(f"seq {seq} comes after seq {chain.last_seq}: out of order")
    elif seq > chain.last_seq + 1:
        missing = seq - chain.last_seq - 1
        problems.append(
            f"seq {seq} follows seq {chain.last_seq}: {missing} record(s) missing between them"
        )
    if fields["prev_hash"] != chain.last_hash:
        problems.append(f"its prev_hash is not the hash of seq {chain.last_seq} before it")
    return problems


# Archives (docs/archive-format.md): an ended on-sale's whole trail and entries in one file.

GZIP_MAGIC = b"\x1f\x8b"
ARCHIVE_KIND = "waitingroom.archive"
ARCHIVE_FORMATS = (1,)
# What an archive keeps of an entry, exactly these keys: nothing a fan could be reached by.
ENTRY_KEYS = (
    "ticket_id",
    "tier",
    "lane",
    "order_key",
    "status",
    "joined_at",
    "status_changed_at",
    "admitted_at",
    "pass_issued_at",
    "pass_expires_at",
    "ended_at",
    "reentered_at",
    "passed_over_at",
    "notified_at",
    "quoted_p10",
    "quoted_p50",
    "quoted_p90",
)


class BadArchive(Exception):
    """A line of an archive that is not what the format says (exit 1: it was an archive)."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(problem)
        self.line, self.problem = line, problem


class Archive:
    """An archive read line by line: its records handed to ``check`` as they come, the rest
    (header, entries, end line, the digest of every line before the end) kept aside."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines = gzip.GzipFile(fileobj=stream, mode="rb")
        self.header: dict[str, Any] = {}
        self.end: dict[str, Any] | None = None
        self.digest = hashlib.sha256()
        self.records = 0
        self.entries = 0
        self.statuses: dict[str, int] = {}
        self.last_root: Any = None

    def read_header(self) -> None:
        first = self.lines.readline()
        try:
            line = json.loads(first)
        except ValueError:
            line = None
        header = line.get("archive") if isinstance(line, dict) and len(line) == 1 else None
        if not isinstance(header, dict) or header.get("kind") != ARCHIVE_KIND:
            raise BadInput("a compressed file, but not an archive of the waiting room")
        if header.get("format") not in ARCHIVE_FORMATS:
            raise BadInput(
                f"an archive of format {header.get('format')!r}; this checker reads format"
                f" {', '.join(map(str, ARCHIVE_FORMATS))}"
            )
        event = header.get("event")
        if not isinstance(event, dict) or type(event.get("id")) is not int:
            raise BadInput("an archive whose header names no on-sale")
        self.header = header
        self.digest.update(first)

    def trail(self) -> Iterator[Record]:
        for number, text in enumerate(self.lines, start=2):
            where = f"line {number} of the archive"
            if self.end is not None:
                raise BadArchive(number, "a line after the end line")
            try:
                line = json.loads(text)
            except ValueError:
                raise BadArchive(number, "not a JSON line") from None
            if not isinstance(line, dict) or len(line) != 1:
                raise BadArchive(number, "not an object with one key (record, entry or end)")
            ((kind, value),) = line.items()
            if kind == "end":
                self.end = value if isinstance(value, dict) else {}
                continue
            self.digest.update(text)
            if kind == "record":
                if self.entries:
                    raise BadArchive(number, "a record after the entries")
                if not isinstance(value, dict):
                    raise BadArchive(number, "a record that is not an object")
                if value.get("event_id") != self.header["event"]["id"]:
                    raise BadArchive(number, "a record of another on-sale")
                self.records += 1
                if value.get("action") == "root" and value.get("lane") is None:
                    self.last_root = value.get("data")
                yield Record(_name(value, where), value)
            elif kind == "entry":
                if not isinstance(value, dict) or set(value) != set(ENTRY_KEYS):
                    raise BadArchive(number, "an entry with other fields than an archive keeps")
                self.entries += 1
                status = str(value["status"])
                self.statuses[status] = self.statuses.get(status, 0) + 1
            else:
                raise BadArchive(number, f"a line of an unknown kind ({kind})")

    def problem(self, checked: Checked) -> str:
        """What the whole file fails to hold, once its records all verified ("" if all)."""
        if self.end is None:
            return "the archive has no end line: it is cut short"
        counted = {"records": self.records, "entries": self.entries}
        if self.end != {**counted, "sha256": self.digest.hexdigest()}:
            return (
                f"its end line says {self.end}, but the lines before it are {counted} with"
                f" sha256 {self.digest.hexdigest()}"
            )
        if self.header.get("entries_by_status") != self.statuses:
            return "the header's counts of entries by status are not the entries'"
        for key, chain in checked.chains.items():
            if chain.first_seq != 1:
                return f"{_chain_name(key)} starts at seq {chain.first_seq}, not at its start"
        return self._heads_problem(checked.chains)

    def _heads_problem(self, chains: dict[ChainKey, Chain]) -> str:
        event_id = self.header["event"]["id"]
        heads = self.header.get("heads")
        try:
            ends: dict[ChainKey, tuple[int, str]] = {
                (event_id, None): (heads["root"]["seq"], heads["root"]["hash"])
            }
            lanes = [(h["lane"], h["seq"], h["hash"]) for h in heads["lanes"]]
        except (KeyError, TypeError):
            return "the header's heads are not a root chain's and lanes' seq and hash"
        for lane, seq, digest in lanes:
            ends[(event_id, json.dumps(lane, ensure_ascii=False))] = (seq, digest)
        for key in chains.keys() - ends.keys():
            return f"{_chain_name(key)} is not among the chains the header lists"
        for key, (seq, digest) in ends.items():
            chain = chains.get(key)
            found = (chain.last_seq, chain.last_hash) if chain else (0, GENESIS_HASH)
            if found != (seq, digest):
                return (
                    f"{_chain_name(key)} ends at seq {found[0]}, the header says at seq {seq}:"
                    " records cut from its end, or added"
                )
        listed = [{"lane": lane, "seq": seq, "hash": digest} for lane, seq, digest in lanes]
        if any(seq for _, seq, _ in lanes) and (
            not isinstance(self.last_root, dict) or self.last_root.get("lanes") != listed
        ):
            return "the last root record does not list every lane at its last record"
        return ""


def verify_archive(stream: IO[bytes], out: IO[str]) -> int:
    """An archive: every record as in ``verify``, each chain whole from seq 1 to the head
    the header lists (an on-sale with lanes: the last root record listing them all), the
    entries' fields and counts, and the end line's counts and sha256 of every line before."""
    archive = Archive(stream)
    try:
        archive.read_header()
        checked = check(archive.trail(), out)
        problem = "" if checked is None else archive.problem(checked)
    except BadArchive as exc:
        print(f"FAILED at line {exc.line} of the archive: {exc.problem}.", file=out)
        return 1
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        print(f"FAILED: the compressed file is damaged or cut short ({exc}).", file=out)
        return 1
    if checked is None:
        return 1
    if problem:
        print(f"FAILED: {problem}.", file=out)
        return 1
    report(checked, out)
    event, heads = archive.header["event"], archive.header["heads"]
    print(
        f"Archive of on-sale {event.get('slug')} (id {event['id']}), archived at"
        f" {archive.header.get('archived_at')}: {archive.records} records and"
        f" {archive.entries} entries, every chain whole from its start to the head listed.\n"
        f"  root chain head: seq {heads['root']['seq']}, hash {heads['root']['hash']}\n"
        f"  sha256 {archive.digest.hexdigest()}\n"
        "Compare that sha256 and head with what the room says of the archived on-sale.",
        file=out,
    )
    return 0


def _binary(name: str) -> IO[bytes]:
    return sys.stdin.buffer if name == "-" else open(name, "rb")


def place_key(seed: str, ticket_id: str) -> int:
    """A random line's place: the first 52 bits of sha256(seed + ":" + ticket_id)."""
    return int(_sha256(f"{seed}:{ticket_id}")[:13], 16)


def check_order(records: list[Record], seed: str, out: IO[str]) -> int:
    """0 when the revealed ``seed`` is the committed one and every first admission's key is
    its place, in place order within each run and tier; 1 (printed) otherwise."""
    committed = {
        str(r.fields["event_id"]): r.fields["data"].get("shuffle_seed_sha256")
        for r in records
        if r.fields["action"] == "event_created" and isinstance(r.fields["data"], dict)
    }
    if not committed:
        print("FAILED: no event_created record to hold the seed's commitment.", file=out)
        return 1
    if _sha256(seed) not in committed.values():
        print("FAILED: the seed's SHA-256 is not the shuffle_seed_sha256 committed to.", file=out)
        return 1
    # A rejoin keeps the place its identity's previous ticket left unused, and its joined
    # record names the ticket whose hash the place is: each such place is taken once.
    placed_by = {
        str(r.fields["ticket_id"]): str(r.fields["data"]["placed_by"])
        for r in records
        if r.fields["action"] == "joined"
        and isinstance(r.fields["data"], dict)
        and r.fields["data"].get("placed_by")
    }
    seen: set[str] = set()
    taken: set[str] = set()
    runs: dict[tuple[str, str, str], list[int]] = {}
    mismatches = 0
    for record in records:
        fields = record.fields
        ticket, data = str(fields["ticket_id"]), fields["data"]
        if fields["action"] != "admitted" or ticket in seen or not isinstance(data, dict):
            continue
        seen.add(ticket)  # a second admission is a re-entry's, from the front of the tier
        hashed = placed_by.get(ticket, ticket)
        place = place_key(seed, hashed)
        if data.get("order_key") != place:
            mismatches += 1
            print(f"Not its place: {record.where} (ticket {ticket}).", file=out)
        elif hashed in taken:
            mismatches += 1
            print(f"A place taken twice: {record.where} (ticket {hashed}'s).", file=out)
        taken.add(hashed)
        run = (str(fields["event_id"]), str(fields["at_hashed"]), str(data.get("tier")))
        runs.setdefault(run, []).append(place)
    unordered = sum(1 for places in runs.values() if places != sorted(places))
    print(
        f"Order: {len(seen)} first admissions, {mismatches} not at their place, {unordered} of"
        f" {len(runs)} runs (per tier) not lowest place first.",
        file=out,
    )
    return 1 if mismatches or unordered else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check an export of the waiting room's audit trail (JSON pages, a JSON"
        " array, JSON lines or the CSV export), or an archive of an ended on-sale: every"
        " hash, link and seq.",
        epilog="Exit status: 0 all holds, 1 a bad record (named), 2 bad usage or input.",
    )
    parser.add_argument("file", help="the export or an archive, or - for standard input")
    parser.add_argument("--seed", help="a random on-sale's revealed seed: check its order too")
    args = parser.parse_args(argv)
    try:
        raw = io.BufferedReader(_binary(args.file))  # type: ignore[arg-type]
        with raw:
            if raw.peek(2)[:2] == GZIP_MAGIC:
                return verify_archive(raw, sys.stdout)
            stream = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            if args.seed is None:
                return verify(records_of(stream), sys.stdout)
            records = list(records_of(stream))
            return verify(iter(records), sys.stdout) or check_order(records, args.seed, sys.stdout)
    except BadInput as exc:
        print(f"{parser.prog}: {args.file}: {exc}", file=sys.stderr)
    except UnicodeDecodeError as exc:
        print(f"{parser.prog}: {args.file}: not UTF-8 text ({exc.reason})", file=sys.stderr)
    except csv.Error as exc:
        print(f"{parser.prog}: {args.file}: not CSV: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"{parser.prog}: {args.file}: {exc.strerror or exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
