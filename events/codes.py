"""Access codes as fans type them: case and surrounding spaces do not matter."""

import re

from django.utils.crypto import salted_hmac

ACCESS_CODE_MAX_LENGTH = 64
# What a slug may look like; checked before any lookup (PostgreSQL refuses NUL in text).
SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
_ACCESS_CODE_RE = re.compile(r"^[A-Z0-9][A-Z0-9_.\-]*$")


def normalise_access_code(raw: str) -> str:
    return raw.strip().upper()


def is_well_formed_access_code(code: str) -> bool:
    return len(code) <= ACCESS_CODE_MAX_LENGTH and bool(_ACCESS_CODE_RE.match(code))


def access_code_tag(raw: str) -> str:
    """A short keyed digest of a code as typed (normalised), for the audit trail: equal codes
    get equal tags, so staff can tell one stale code tried a thousand times from a thousand
    guesses, while nobody without the room's secret key can test guesses against it."""
    return salted_hmac("waitingroom.access-code-tag", normalise_access_code(raw)).hexdigest()[:12]
