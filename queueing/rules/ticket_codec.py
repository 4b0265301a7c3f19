"""Tickets: the fan's opaque, URL-safe handle on a queue entry.

A ticket names the entry, its event and its tier, so that the status path can find the entry
in the hot index after checking only the ticket: no database or Redis call to verify.

The three ids are encrypted, not merely signed: entry ids are drawn in join order, and a
readable id would tell anyone holding two tickets how many fans joined between them. A ticket
is AES-SIV (RFC 5297, deterministic authenticated encryption) of the ids packed as three
64-bit integers, in base64url without padding: always 54 characters, of which nothing can be
read or changed without the key. It is deterministic so one entry always has the same ticket
(pages, cookies and sockets compare them); two entries never share a plaintext, so that
reveals nothing either.

A fan in a line of several lanes carries their lane (queueing/rules/lanes.py) in the top byte
of the tier's 64-bit word, so that a poll finds their lane's keys without a read; tier ids
stay below 2**56, and a fan of lane 0 (every fan of a one-lane line) has the ticket such a
fan always had.

A place moved to another browser (queueing/line/place_links.py) gets a new ticket there: the
same ids and the place's new holder key (16 bytes) sealed with them, 75 characters. The
ticket the place had before names another holder (or none), and is refused wherever the
entry's holder is known (``TicketRef.holder``): the old browser holds nothing any more.

The key is derived from ``SECRET_KEY`` with HKDF; tickets issued under a key that was moved to
``SECRET_KEY_FALLBACKS`` are still read, as Django's signer does.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.utils.encoding import force_bytes

from queueing.rules.errors import ErrorCode, QueueError

# Salt and info bind the derived key to tickets alone: the same
# SECRET_KEY also keys sessions, cookies and proof-of-work challenges.
_HKDF_SALT = b"waitingroom.ticket"
_HKDF_INFO = b"waitingroom.ticket.v2 AES-SIV-512"
_IDS = struct.Struct(">QQQ")  # entry, event, tier (its top byte: the lane)
_LANE_SHIFT = 56
_MAX_TIER = 2**_LANE_SHIFT - 1
_MAX_LANE = 255
_HOLDER_BYTES = 16  # a moved place's holder key (32 hex digits), after the ids
# base64url, unpadded, of 24 bytes of ids (+ 16 of holder key) + 16 bytes of synthetic IV
_SEALED_RE = re.compile(r"^[A-Za-z0-9_-]{54}(?:[A-Za-z0-9_-]{21})?$")
_MAX_ID = 2**63 - 1  # PostgreSQL bigint
_HOLDER_RE = re.compile(r"^(?:[0-9a-f]{32})?$")

# Anything longer than a ticket (54, or 75 once moved) and what may surround one is refused
# before any work.
MAX_TICKET_LENGTH = 128


class InvalidTicket(QueueError, code=ErrorCode.INVALID_TICKET, detail="This ticket is not valid."):
    """Malformed, or it does not authenticate (the reason is not told to the client)."""


@dataclass(frozen=True)
class TicketRef:
    entry_id: int
    event_id: int
    tier_id: int
    # The holder key of the browser the place was moved to ("": a place never moved): a
    # ticket is the place's only while it names the entry's holder key.
    holder: str = ""
    # The fan's lane of the on-sale's line (0 in a line of one lane).
    lane: int = 0


@functools.lru_cache(maxsize=16)
def _cipher(secret: bytes) -> AESSIV:
    # Cached per secret: HKDF and the key schedule cost more than the decryption itself.
    key = HKDF(algorithm=SHA256(), length=64, salt=_HKDF_SALT, info=_HKDF_INFO).derive(secret)
    return AESSIV(key)


def ticket_issue(ref: TicketRef) -> str:
    if not _HOLDER_RE.match(ref.holder):
        raise ValueError("a holder key is 32 lower-case hex digits")
    if not (0 <= ref.lane <= _MAX_LANE and 1 <= ref.tier_id <= _MAX_TIER):
        raise ValueError("a lane is 0-255 and a tier id below 2**56")
    tier_word = ref.tier_id | (ref.lane << _LANE_SHIFT)
    plain = _IDS.pack(ref.entry_id, ref.event_id, tier_word) + bytes.fromhex(ref.holder)
    sealed = _cipher(force_bytes(settings.SECRET_KEY)).encrypt(plain, None)
    return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")


def ticket_read(ticket: str) -> TicketRef:
    # Tickets are ASCII; anything else (lone surrogates included) is not one of ours.
    if (
        not isinstance(ticket, str)
        or not ticket
        or len(ticket) > MAX_TICKET_LENGTH
        or not ticket.isascii()
    ):
        raise InvalidTicket()
    if _SEALED_RE.match(ticket):
        return _read_sealed(ticket)
    raise InvalidTicket()


def _read_sealed(ticket: str) -> TicketRef:
    try:
        sealed = base64.urlsafe_b64decode(ticket + "==")
    except (binascii.Error, ValueError) as exc:
        raise InvalidTicket() from exc
    # One string per ticket: the last character's two spare bits must be zero, or several
    # spellings of a ticket would all be accepted.
    if base64.urlsafe_b64encode(sealed).rstrip(b"=") != ticket.encode("ascii"):
        raise InvalidTicket()
    for secret in (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS):
        try:
            plain = _cipher(force_bytes(secret)).decrypt(sealed, None)
        except InvalidTag:
            continue
        return _ref(*_IDS.unpack(plain[: _IDS.size]), holder=plain[_IDS.size :].hex())
    raise InvalidTicket()


def _ref(entry_id: int, event_id: int, tier_word: int, *, holder: str) -> TicketRef:
    # Only we can make a ticket that authenticates, but ids a database would refuse must
    # never reach it.
    tier_id, lane = tier_word & _MAX_TIER, tier_word >> _LANE_SHIFT
    if not all(1 <= value <= _MAX_ID for value in (entry_id, event_id, tier_id)):
        raise InvalidTicket()
    if len(holder) not in (0, 2 * _HOLDER_BYTES):
        raise InvalidTicket()
    return TicketRef(
        entry_id=entry_id, event_id=event_id, tier_id=tier_id, holder=holder, lane=lane
    )
