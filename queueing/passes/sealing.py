"""Pass-signing private keys sealed at rest: Fernet (AES-128-CBC and HMAC-SHA256) under keys that
are not in the database (``WR_PASS_KEY_ENCRYPTION_KEY``), so that a copy of PostgreSQL (a backup,
a replica, a stolen dump) cannot sign passes.

Several keys may be set: the first seals, every one opens, so the sealing key can be rotated
(a new key first, the old one second, ``manage.py reseal_pass_keys``, then the old one dropped).
An opened key is kept in-process: passes are signed on every admission and hand-over, and the
sealed text of a key never changes but by a reseal, which gives it a new text.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings


class SealedKeyUnreadable(Exception):
    """None of the encryption keys opens a stored key: the key that sealed it was dropped."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _sealer() -> MultiFernet:
    return _fernet(tuple(settings.WR_PASS_KEY_ENCRYPTION_KEYS))


def private_key_seal(private: Ed25519PrivateKey) -> str:
    """``private`` as stored: its PKCS#8 encoding sealed under the first encryption key."""
    raw = private.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return _sealer().encrypt(raw).decode()


@lru_cache(maxsize=64)
def _opened(sealed: str, keys: tuple[str, ...]) -> Ed25519PrivateKey:
    try:
        raw = _fernet(keys).decrypt(sealed.encode())
    except InvalidToken as exc:
        raise SealedKeyUnreadable(
            "a pass-signing key cannot be opened with WR_PASS_KEY_ENCRYPTION_KEY: keep the key "
            "that sealed it in the list (second) until `manage.py reseal_pass_keys` has run"
        ) from exc
    private = serialization.load_der_private_key(raw, password=None)
    if not isinstance(private, Ed25519PrivateKey):
        raise SealedKeyUnreadable("a stored pass-signing key is not an Ed25519 key")
    return private


def private_key_open(sealed: str) -> Ed25519PrivateKey:
    return _opened(sealed, tuple(settings.WR_PASS_KEY_ENCRYPTION_KEYS))


def private_key_reseal(sealed: str) -> str:
    """``sealed`` sealed again under the first encryption key (opened by any of them)."""
    try:
        return _sealer().rotate(sealed.encode()).decode()
    except InvalidToken as exc:
        raise SealedKeyUnreadable("a pass-signing key cannot be opened to reseal it") from exc


def text_seal(text: str) -> str:
    """Any other secret the room must read back to use (a webhook endpoint's signing secret),
    sealed under the same keys as the pass keys, and resealed with them."""
    return _sealer().encrypt(text.encode()).decode()


def text_open(sealed: str) -> str:
    try:
        return (
            _fernet(tuple(settings.WR_PASS_KEY_ENCRYPTION_KEYS)).decrypt(sealed.encode()).decode()
        )
    except InvalidToken as exc:
        raise SealedKeyUnreadable(
            "a sealed secret cannot be opened with WR_PASS_KEY_ENCRYPTION_KEY"
        ) from exc
