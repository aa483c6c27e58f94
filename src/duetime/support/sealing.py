"""Values sealed at rest: which are sealed, in what form, and how a reader sees them.

A copy of the database, a backup or a replica then shows none of what users put in payloads,
delivery bodies, errors and tracebacks. The cipher and its keys are :mod:`.keyring`'s; this
module says what a process seals (:class:`Sealing`: its ring, its namespaces) and the forms it
stores, which fit every column that holds text or JSON: a payload becomes the JSON object
``{"$sealed": "dts1:…"}``, an error or traceback the text ``$sealed:dts1:…``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from duetime.errors import InvalidInput
from duetime.support.jsontext import json_text, load_json
from duetime.support.keyring import (
    VERSION_PREFIX,
    KeyRing,
    SealBroken,
    SealKeyMissing,
    key_id_of,
)

MARK = "$sealed"
"""The one key of a sealed payload's JSON object."""
TEXT_MARK = MARK + ":"
"""What a sealed error or traceback starts with."""
SHOWN = "sealed"
"""What a reader without the key is shown in place of a sealed text."""

_WRAPPER = '{"' + MARK + '":"'
"""A sealed payload's JSON text starts so as written here; PostgreSQL's jsonb gives it back
with a space after the colon (:data:`_WRAPPER_JSONB`). Both end with :data:`_WRAPPER_END`."""
_WRAPPER_JSONB = '{"' + MARK + '": "'
_WRAPPER_START = '{"' + MARK + '":'
_WRAPPER_END = '"}'
_TEXT_AT = len(TEXT_MARK)
_PAYLOAD = b"payload"
_TEXT = b"text"


class SealedNamespace(InvalidInput):
    """A request that needs the database to read payloads, on a namespace that seals them."""

    code = "sealed_namespace"

    def __init__(self, namespace: str, field: str) -> None:
        super().__init__(
            field,
            f"refused on namespace {namespace!r}: its payloads are sealed at rest, so the "
            "database cannot search or partition by them",
        )


def sealed_token(value: Any) -> str | None:
    """A decoded payload's sealed token, or None when the payload is not sealed."""
    if type(value) is dict and len(value) == 1:
        token = value.get(MARK)
        if type(token) is str and token.startswith(VERSION_PREFIX):
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
        return _WRAPPER + self.ring.seal(text.encode(), _PAYLOAD) + _WRAPPER_END

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
        without decoding its wrapper first: this is the claim's path, and a plain payload
        pays one ``startswith`` for it."""
        if text.startswith(_WRAPPER_START):
            start = len(_WRAPPER) if text.startswith(_WRAPPER) else len(_WRAPPER_JSONB)
            token = text[start:-2]
            # no quote inside: the slice is the whole JSON string, with no escapes in it
            if text.endswith('"}') and token.startswith(VERSION_PREFIX) and '"' not in token:
                return self._open_token(token, strict)
        return self.open_payload(load_json(text), strict=strict)

    def open_payload(self, value: Any, *, strict: bool = False) -> Any:
        """A stored payload (decoded JSON) as a reader sees it: opened when sealed. One that
        cannot be opened here raises when ``strict`` (a worker about to run it), else reads
        as ``{"$sealed": "<key id>"}`` (a listing shows it as sealed)."""
        if type(value) is not dict or len(value) != 1:  # the common case, first and cheap
            return value
        token = value.get(MARK)
        if type(token) is not str or not token.startswith(VERSION_PREFIX):
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
            return self.ring.open(text[_TEXT_AT:], _TEXT).decode()
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
        return _WRAPPER + self.ring.seal(plain, _PAYLOAD) + _WRAPPER_END


NO_SEALING = Sealing()

__all__ = [
    "MARK",
    "NO_SEALING",
    "KeyRing",
    "SealBroken",
    "SealKeyMissing",
    "SealedNamespace",
    "Sealing",
    "Unopened",
]
