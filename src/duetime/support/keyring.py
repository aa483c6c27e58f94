"""The key ring that seals values at rest: named AES-256-GCM keys, the first sealing.

A sealed value is text, ``dts1:<key id>:<base64 of salt, nonce, ciphertext and tag>``: it says
which key sealed it, so a ring holds several keys and every one opens what it sealed.

A nonce is never reused: no value is sealed under a key of the ring itself. Each ring draws a
random 128-bit salt and derives from it, with HKDF-SHA256, the data key it seals with; its
nonces count up from zero under that data key, and after 2^32 of them it draws a new salt.
Two processes, or two rings, never share a data key (the salts are random), and one data key
never meets the same nonce twice (its count only rises), so no counter is shared between
processes and none needs to survive a restart.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import os
import re
import threading
from collections.abc import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from duetime.errors import DuetimeError, InvalidInput
from duetime.support.base64codec import decode as b64decode
from duetime.support.base64codec import encode as b64encode

VERSION = "dts1"
VERSION_PREFIX = VERSION + ":"
SEALS_PER_DATA_KEY = 2**32
_KEY_AT = len(VERSION_PREFIX)
_SALT = 16
_NONCE = 12
_BODY = _SALT + _NONCE
_TAG = 16
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_OPENERS_KEPT = 4096


class SealKeyMissing(DuetimeError):
    """A sealed value names a key this process's key ring does not hold."""

    code = "seal_key_missing"

    def __init__(self, key_id: str) -> None:
        super().__init__(
            f"sealed with key {key_id!r}, which this process's key ring (DUETIME_SEAL_KEYS) "
            "does not hold"
        )
        self.key_id = key_id


class SealBroken(DuetimeError):
    """A sealed value that does not open: altered, truncated, or not sealed by duetime."""

    code = "seal_broken"


class _DataKey:
    """A data key and the count of its nonces: ``next(count)`` is atomic in CPython, so
    sealing takes no lock (only a data key's renewal does)."""

    __slots__ = ("aead", "count", "salt")

    def __init__(self, salt: bytes, aead: AESGCM) -> None:
        self.salt = salt
        self.aead = aead
        self.count = itertools.count()


def _derive(secret: bytes, key_id: str, salt: bytes) -> AESGCM:
    data_key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=salt, info=b"duetime seal " + key_id.encode()
    ).derive(secret)
    return AESGCM(data_key)


class KeyRing:
    """Named 256-bit keys: the first seals, all open."""

    __slots__ = ("_current", "_first", "_keys", "_lock", "_openers", "_prefix")

    def __init__(self, keys: Iterable[tuple[str, bytes]]) -> None:
        pairs = list(keys)
        if not pairs:
            raise InvalidInput("seal_keys", "needs at least one key")
        self._keys: dict[str, bytes] = {}
        for key_id, secret in pairs:
            if not _KEY_ID.fullmatch(key_id):
                raise InvalidInput(
                    "seal_keys", f"key id {key_id!r} must be 1-64 of A-Z a-z 0-9 _ . -"
                )
            if len(secret) != 32:
                raise InvalidInput(
                    "seal_keys", f"key {key_id!r} must be 32 bytes (256 bits), not {len(secret)}"
                )
            if key_id in self._keys:
                raise InvalidInput("seal_keys", f"key id {key_id!r} is given twice")
            self._keys[key_id] = secret
        self._first = pairs[0][0]
        self._prefix = f"{VERSION}:{self._first}:"
        self._lock = threading.Lock()
        self._current = self._new_data_key()
        self._openers: dict[str, dict[bytes, AESGCM]] = {key_id: {} for key_id in self._keys}

    @classmethod
    def parse(cls, text: str, field: str = "seal_keys") -> KeyRing:
        """``"k2:<base64>,k1:<base64>"`` (the first seals) → a ring; errors name ``field``."""
        pairs: list[tuple[str, bytes]] = []
        for item in text.split(","):
            item = item.strip()
            if not item:
                continue
            key_id, sep, encoded = item.partition(":")
            if not sep:
                raise InvalidInput(field, "each key is <id>:<base64 of 32 bytes>, comma-separated")
            try:
                secret = base64.b64decode(encoded.strip(), validate=True)
            except binascii.Error:
                raise InvalidInput(field, f"key {key_id.strip()!r} is not base64") from None
            pairs.append((key_id.strip(), secret))
        try:
            return cls(pairs)
        except InvalidInput as exc:
            raise InvalidInput(field, exc.message.partition(": ")[2]) from None

    @staticmethod
    def new_key() -> str:
        """A fresh key, base64, for a ring's settings."""
        return base64.b64encode(os.urandom(32)).decode()

    @property
    def first(self) -> str:
        """The id of the key that seals."""
        return self._first

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def _new_data_key(self) -> _DataKey:
        salt = os.urandom(_SALT)
        return _DataKey(salt, _derive(self._keys[self._first], self._first, salt))

    def _renew(self, spent: _DataKey) -> _DataKey:
        """A fresh data key once ``spent`` has sealed its bound (one thread makes it)."""
        with self._lock:
            if self._current is spent:
                self._current = self._new_data_key()
            return self._current

    def seal(self, plain: bytes, purpose: bytes) -> str:
        """``plain`` → ``dts1:<first key id>:<base64>``; ``purpose`` is bound to it, so a sealed
        error cannot be passed off as a payload."""
        data_key = self._current
        count = next(data_key.count)
        while count >= SEALS_PER_DATA_KEY:
            data_key = self._renew(data_key)
            count = next(data_key.count)
        nonce = count.to_bytes(_NONCE, "big")
        sealed = data_key.salt + nonce + data_key.aead.encrypt(nonce, plain, purpose)
        return self._prefix + b64encode(sealed).decode()

    def open(self, token: str, purpose: bytes) -> bytes:
        """A :meth:`seal`'s result → the plain bytes; :class:`SealKeyMissing` names a key the
        ring lacks, :class:`SealBroken` says what else is wrong.

        Every row a worker claims comes through here, so it does no more than it must: one
        base64 decoding, byte slices (the cipher takes them faster than memoryviews) and the
        cipher of the salt found in a dict."""
        end = token.find(":", _KEY_AT) if token.startswith(VERSION_PREFIX) else -1
        if end < 0:
            raise SealBroken(f"not a sealed value of this version ({token[:_KEY_AT]!r})")
        key_id = token[_KEY_AT:end]
        openers = self._openers.get(key_id)
        if openers is None:
            raise SealKeyMissing(key_id)
        try:  # not strict: the tag refuses any altered byte
            raw = b64decode(token[end + 1 :])
        except ValueError:  # binascii.Error, or a character beyond ASCII
            raise SealBroken(f"a value sealed with key {key_id!r} is not base64") from None
        if len(raw) < _BODY + _TAG:
            raise SealBroken(f"a value sealed with key {key_id!r} is cut short")
        salt = raw[:_SALT]
        aead = openers.get(salt)
        if aead is None:
            aead = self._opener(openers, key_id, salt)
        try:
            return aead.decrypt(raw[_SALT:_BODY], raw[_BODY:], purpose)
        except InvalidTag:
            raise SealBroken(f"a value sealed with key {key_id!r} does not open") from None

    def _opener(self, openers: dict[bytes, AESGCM], key_id: str, salt: bytes) -> AESGCM:
        """The cipher of another process's data key, derived once and kept (a bounded few)."""
        if len(openers) >= _OPENERS_KEPT:
            openers.clear()
        aead = openers[salt] = _derive(self._keys[key_id], key_id, salt)
        return aead

    def __repr__(self) -> str:  # never the keys themselves
        return f"KeyRing(first={self._first!r}, keys={list(self._keys)!r})"


def key_id_of(token: str) -> str | None:
    """The key id a sealed token names, or None for anything else."""
    version, _, rest = token.partition(":")
    return rest.partition(":")[0] if version == VERSION and rest else None
