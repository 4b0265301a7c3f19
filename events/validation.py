"""What an on-sale's fields may hold, checked without any I/O: slugs, access codes as fans
type them (case and surrounding spaces do not matter), the hosts staff may allow a return
URL to go to, and text PostgreSQL can store at all. The queue's pure rules use these too."""

from __future__ import annotations

import re

from django.utils.crypto import salted_hmac

ACCESS_CODE_MAX_LENGTH = 64
# How many lanes an on-sale's line may be split in (queueing/rules/lanes.py): a lane's number
# travels in a ticket's top byte of the tier id, and 64 lanes spread over any cluster's masters.
LANES_MIN = 1
LANES_MAX = 64
# What a slug may look like; checked before any lookup (PostgreSQL refuses NUL in text).
SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
# Queue-it's ids travel in its token, whose fields split on "_" and "~", and its connectors
# hash the cookie's event id as stored but compare it lower-cased: no upper case either.
QUEUEIT_CUSTOMER_ID_RE = re.compile(r"^[A-Za-z0-9-]{0,64}\Z")
QUEUEIT_EVENT_ID_RE = re.compile(r"^[a-z0-9-]{0,64}\Z")
_ACCESS_CODE_RE = re.compile(r"^[A-Z0-9][A-Z0-9_.\-]*$")
# NUL, and a lone surrogate (half of a UTF-16 pair: JSON's "\ud800" escapes make one).
_UNSTORABLE_CHARACTER = re.compile(r"[\x00\ud800-\udfff]")


def is_storable_text(text: str) -> bool:
    """Whether PostgreSQL can hold ``text`` at all: it refuses NUL in text, and a lone
    surrogate has no UTF-8 form to send it in (the driver fails before the query leaves).
    A form or a query string can only bring NUL (as ``%00``: Django decodes them as UTF-8,
    with replacement); a JSON body can bring both."""
    return _UNSTORABLE_CHARACTER.search(text) is None


def normalise_access_code(raw: str) -> str:
    return raw.strip().upper()


def is_well_formed_access_code(code: str) -> bool:
    return len(code) <= ACCESS_CODE_MAX_LENGTH and bool(_ACCESS_CODE_RE.match(code))


def access_code_tag(raw: str) -> str:
    """A short keyed digest of a code as typed (normalised), for the audit trail: equal codes
    get equal tags, so staff can tell one stale code tried a thousand times from a thousand
    guesses, while nobody without the room's secret key can test guesses against it."""
    return salted_hmac("waitingroom.access-code-tag", normalise_access_code(raw)).hexdigest()[:12]


# A DNS name or IPv4 address, optionally with a port; lower case after normalising.
_HOST = re.compile(
    r"^(?=.{1,253}(:\d{1,5})?$)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*(:\d{1,5})?$"
)


def return_host_normalise(raw: str) -> str | None:
    """``raw`` as a host staff may allow (``shop.example.com``, ``127.0.0.1:8080``), lower
    case; None when it is not one (a scheme, a path, spaces, a wildcard)."""
    host = raw.strip().lower().rstrip(".")
    return host if _HOST.match(host) else None
