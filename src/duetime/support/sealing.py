"""Values sealed at rest: AES-256-GCM under a key ring, the one place duetime encrypts.

A copy of the database, a backup or a replica then shows none of what users put in payloads,
delivery bodies, errors and tracebacks. A sealed value says which key sealed it, so a ring holds
several keys: the first seals, every one opens, and a rotation re-seals old values to the first.

The sealed form is text, ``dts1:<key id>:<base64 of salt, nonce, ciphertext and tag>``, so it
fits every column that holds text or JSON: a payload becomes the JSON object
``{"$sealed": "dts1:…"}``, an error or traceback the text ``$sealed:dts1:…``.

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
from binascii import a2b_base64, b2a_base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from duetime.errors import DuetimeError, InvalidInput
from duetime.support.jsontext import json_text, load_json

VERSION = "dts1"
MARK = "$sealed"
"""The one key of a sealed payload's JSON object."""
TEXT_MARK = MARK + ":"
"""What a sealed error or traceback starts with."""
SHOWN = "sealed"
"""What a reader without the key is shown in place of a sealed text."""

SEALS_PER_DATA_KEY = 2**32
_SALT = 16
_NONCE = 12
_VERSION_PREFIX = VERSION + ":"
_KEY_AT = len(_VERSION_PREFIX)
_WRAPPERS = ('{"' + MARK + '":"', '{"' + MARK + '": "')
"""A sealed payload's JSON text: as written here, and as PostgreSQL's jsonb gives it back."""
_WRAPPER_START = '{"' + MARK + '":'
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PAYLOAD = b"payload"
_TEXT = b"text"
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


class SealedNamespace(InvalidInput):
    """A request that needs the database to read payloads, on a namespace that seals them."""

    code = "sealed_namespace"

    def __init__(self, namespace: str, field: str) -> None:
        super().__init__(
            field,
            f"refused on namespace {namespace!r}: its payloads are sealed at rest, so the "
            "database cannot search or partition by them",
        )


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
        sealed = data_key.aead.encrypt(nonce, plain, purpose)
        return self._prefix + b2a_base64(data_key.salt + nonce + sealed, newline=False).decode()

    def open(self, token: str, purpose: bytes) -> bytes:
        """A :meth:`seal`'s result → the plain bytes; :class:`SealKeyMissing` names a key the
        ring lacks, :class:`SealBroken` says what else is wrong."""
        end = token.find(":", _KEY_AT) if token.startswith(_VERSION_PREFIX) else -1
        if end < 0:
            raise SealBroken(f"not a sealed value of this version ({token[:_KEY_AT]!r})")
        key_id = token[_KEY_AT:end]
        openers = self._openers.get(key_id)
        if openers is None:
            raise SealKeyMissing(key_id)
        try:  # not strict: the tag refuses any altered character
            raw = memoryview(a2b_base64(token[end + 1 :]))  # sliced without copies
        except binascii.Error:
            raise SealBroken(f"a value sealed with key {key_id!r} is not base64") from None
        salt = bytes(raw[:_SALT])
        aead = openers.get(salt)
        if aead is None:
            if len(openers) >= _OPENERS_KEPT:
                openers.clear()
            aead = openers[salt] = _derive(self._keys[key_id], key_id, salt)
        try:
            return aead.decrypt(raw[_SALT : _SALT + _NONCE], raw[_SALT + _NONCE :], purpose)
        except InvalidTag:
            raise SealBroken(f"a value sealed with key {key_id!r} does not open") from None

    def __repr__(self) -> str:  # never the keys themselves
        return f"KeyRing(first={self._first!r}, keys={list(self._keys)!r})"


def key_id_of(token: str) -> str | None:
    """The key id a sealed token names, or None for anything else."""
    version, _, rest = token.partition(":")
    return rest.partition(":")[0] if version == VERSION and rest else None


def sealed_token(value: Any) -> str | None:
    """A decoded payload's sealed token, or None when the payload is not sealed."""
    if type(value) is dict and len(value) == 1:
        token = value.get(MARK)
        if type(token) is str and token.startswith(VERSION + ":"):
            return token
    return None


class Unopened(dict[str, str]):
    """A sealed payload this process could not open, as readers see it: ``{"$sealed": "<key
    id>"}``. Its own type, so that nothing writes it back over the sealed value it stands for
    (an edit of the timer's due time, say)."""

    @property
    def key_id(self) -> str:
        return self[MARK]


@dataclass(frozen=True, slots=True)
class Sealing:
    """What a process seals (which namespaces) and with what (its ring).

    ``namespaces`` None seals every namespace; an empty ring seals nothing and still knows a
    sealed value when it reads one (and says which key it would need)."""

    ring: KeyRing | None = None
    namespaces: frozenset[str] | None = None

    @classmethod
    def from_settings(cls, keys: str, namespaces: str) -> Sealing:
        """``DUETIME_SEAL_KEYS`` and ``DUETIME_SEAL_NAMESPACES`` (``*`` or a comma list)."""
        if not keys.strip():
            return cls()
        ring = KeyRing.parse(keys)
        names = [n.strip() for n in namespaces.split(",") if n.strip()]
        if not names:
            raise InvalidInput("seal_namespaces", "is * (all) or a comma-separated list")
        return cls(ring, None if "*" in names else frozenset(names))

    @property
    def enabled(self) -> bool:
        return self.ring is not None

    def seals(self, namespace: str) -> bool:
        return self.ring is not None and (self.namespaces is None or namespace in self.namespaces)

    def refuse(self, namespace: str, what: str) -> None:
        """Raise :class:`SealedNamespace` for a payload search or filter on a sealed namespace."""
        if self.seals(namespace):
            raise SealedNamespace(namespace, what)

    # -- payloads: JSON text in, JSON text out -------------------------------------------

    def seal_payload(self, namespace: str, text: str) -> str:
        """A payload's JSON text as stored: sealed when ``namespace`` is, else as given."""
        if self.ring is None or (self.namespaces is not None and namespace not in self.namespaces):
            return text
        token = self.ring.seal(text.encode(), _PAYLOAD)
        return '{"' + MARK + '":"' + token + '"}'

    def seal_json(self, namespace: str, value: Any) -> str:
        """A value's JSON text as stored (:meth:`seal_payload`); a stand-in for a payload this
        process could not open (:class:`Unopened`) is refused, never stored over it."""
        if isinstance(value, Unopened):
            raise SealKeyMissing(value.key_id)
        return self.seal_payload(namespace, json_text(value))

    def open_payload_text(self, token: str) -> str:
        """A sealed payload's token → its JSON text; raises when it cannot."""
        if self.ring is None:
            key_id = key_id_of(token)
            if key_id is None:
                raise SealBroken("not a sealed value of this version")
            raise SealKeyMissing(key_id)
        return self.ring.open(token, _PAYLOAD).decode()

    def read_payload(self, text: str, *, strict: bool = False) -> Any:
        """A stored payload's JSON text → the value a reader sees (:meth:`open_payload` of its
        decoding). A sealed one, as this module or PostgreSQL's jsonb writes it, is opened
        without decoding its wrapper first: this is the claim's path."""
        if text.startswith(_WRAPPER_START):
            start = len(_WRAPPERS[0]) if text.startswith(_WRAPPERS[0]) else len(_WRAPPERS[1])
            token = text[start:-2]
            if text.endswith('"}') and token.startswith(_VERSION_PREFIX) and '"' not in token:
                return self._open_token(token, strict)
        return self.open_payload(load_json(text), strict=strict)

    def open_payload(self, value: Any, *, strict: bool = False) -> Any:
        """A stored payload (decoded JSON) as a reader sees it: opened when sealed. One that
        cannot be opened here raises when ``strict`` (a worker about to run it), else reads
        as ``{"$sealed": "<key id>"}`` (a listing shows it as sealed)."""
        if type(value) is not dict or len(value) != 1:  # the common case, first and cheap
            return value
        token = value.get(MARK)
        if type(token) is not str or not token.startswith(_VERSION_PREFIX):
            return value
        return self._open_token(token, strict)

    def _open_token(self, token: str, strict: bool) -> Any:
        try:
            ring = self.ring
            if ring is None:
                raise SealKeyMissing(key_id_of(token) or "?")
            return load_json(ring.open(token, _PAYLOAD).decode())
        except (SealKeyMissing, SealBroken):
            if strict:
                raise
            return Unopened({MARK: key_id_of(token) or "?"})

    # -- errors and tracebacks: text in, text out ----------------------------------------

    def seal_error(self, text: str | None) -> str | None:
        """An attempt's error or traceback as stored: sealed whenever this process has a ring,
        in every namespace (an error may quote any payload, and its row does not say whose)."""
        if text is None or self.ring is None:
            return text
        return TEXT_MARK + self.ring.seal(text.encode(), _TEXT)

    def open_text(self, text: str | None) -> str | None:
        """A stored error or traceback as a reader sees it: ``sealed`` when it cannot be
        opened here (an error message is no reason to fail a listing)."""
        if text is None or not text.startswith(TEXT_MARK):
            return text
        if self.ring is None:
            return SHOWN
        try:
            return self.ring.open(text[len(TEXT_MARK) :], _TEXT).decode()
        except (SealKeyMissing, SealBroken):
            return SHOWN

    def reseal_text(self, text: str | None) -> str | None:
        """A stored text sealed again with the first key (None when it needs no change)."""
        if self.ring is None or text is None or not text.startswith(TEXT_MARK):
            return None
        token = text[len(TEXT_MARK) :]
        if key_id_of(token) == self.ring.first:
            return None
        plain = self.ring.open(token, _TEXT)
        return TEXT_MARK + self.ring.seal(plain, _TEXT)

    def reseal_payload_text(self, stored: Mapping[str, Any] | Any) -> str | None:
        """A stored payload (decoded) sealed again with the first key, as JSON text; None when
        it is not sealed or already sealed with the first key."""
        token = sealed_token(stored)
        if self.ring is None or token is None or key_id_of(token) == self.ring.first:
            return None
        plain = self.ring.open(token, _PAYLOAD)
        return '{"' + MARK + '":"' + self.ring.seal(plain, _PAYLOAD) + '"}'


NO_SEALING = Sealing()
