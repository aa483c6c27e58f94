"""A request body's fields, described once: what a body may hold and what /openapi.json says.

A :class:`Body` is the one description of a JSON body: which names it may hold (any other is
"not a known field"), which one it needs, which are whole numbers (JSON's ``3.0`` read as
``3``), and each value's JSON Schema. :meth:`Body.read` is how every interface reads such a body
(the REST API, ``--from-file`` lines, broker messages: :meth:`duetime.TimerRequest.from_dict`),
and :meth:`Body.json_schema` is what the API documents, so no field is taken without being
documented, nor documented without being taken. Each value is then checked by
:mod:`duetime.validation` and the time math, whose words every interface answers with; the
schemas state what those checks take, in JSON Schema's terms (the formats' patterns:
:mod:`duetime.formats`).

A body's own schema is plain data, made when it is documented: reading a request looks only at
the precomputed sets of names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from duetime.errors import InvalidInput
from duetime.formats import identifier_pattern
from duetime.validation import MAX_SUBJECT_LENGTH, whole_number

Schema = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BodyField:
    """One field: its name, its value's schema (null is allowed besides, unless ``required``
    or given a ``default``), and what the document says of it."""

    name: str
    schema: Schema | Callable[[], Schema] = field(default_factory=dict)
    """The value's JSON Schema, without null (an empty one is any JSON), or what makes it when
    documented (a list of zone names, say: nothing a request needs)."""
    description: str | None = None
    examples: tuple[Any, ...] = ()
    required: bool = False
    default: Any = None
    """Not None: the value when absent, and the field is never null."""
    whole: bool = False
    """A count: JSON has one number type, and JSON Schema calls 3.0 an integer."""
    missing: str = "is required"
    """What a body without this (required) field is told."""
    null: bool = True
    """Whether the document lets the field be null (a patch's fields that cannot be cleared
    are not); a ``required`` field, or one with a ``default``, never is."""

    def json_schema(self, nullable: bool = True) -> Schema:
        """The property as /openapi.json shows it (``nullable``: null means absent)."""
        schema = self.schema() if callable(self.schema) else self.schema
        if not (nullable and self.null) or self.required or self.default is not None or not schema:
            shown = dict(schema)
        else:
            shown = {"anyOf": [*_options(schema), {"type": "null"}]}
        if self.default is not None and nullable:
            shown["default"] = self.default
        if self.description is not None:
            shown["description"] = self.description
        if self.examples:
            shown["examples"] = list(self.examples)
        shown["title"] = self.name.replace("_", " ").title()
        return shown


def not_null(*names: str) -> Schema:
    """Present, and not null (absent and null mean the same to the server)."""
    return {
        "required": list(names),
        "properties": {name: {"not": {"type": "null"}} for name in names},
    }


def _options(schema: Schema) -> list[Schema]:
    return list(schema["anyOf"]) if set(schema) == {"anyOf"} else [schema]


@dataclass(frozen=True)
class Body:
    """A JSON object's fields, and the rules between them that a schema states
    (``extra``, e.g. exactly one form of "when")."""

    title: str
    description: str | None
    fields: tuple[BodyField, ...]
    extra: Callable[[], Schema] | None = None
    """More of the object's schema, made when documented (it may list the zone names)."""
    unknown: str = "is not a known field"
    """What a name the body does not hold is told."""
    nullable: bool = True
    """Whether null is as good as absent; if not, a field given is a value (no defaults)."""
    names: frozenset[str] = field(init=False)
    required: tuple[BodyField, ...] = field(init=False)
    whole: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(f.name for f in self.fields))
        object.__setattr__(self, "required", tuple(f for f in self.fields if f.required))
        object.__setattr__(self, "whole", tuple(f.name for f in self.fields if f.whole))

    def read(self, data: Any, field_prefix: str = "") -> dict[str, Any]:
        """``data`` as this body's fields: an object of known names, the required ones present,
        counts as whole numbers; an InvalidInput names the first field that is not."""
        if not isinstance(data, dict):
            raise InvalidInput(field_prefix.rstrip(".") or "body", "must be a JSON object")
        names = self.names
        for name in data:
            if name not in names:
                raise InvalidInput(f"{field_prefix}{name}", self.unknown)
        for needed in self.required:
            if needed.name not in data:
                raise InvalidInput(f"{field_prefix}{needed.name}", needed.missing)
        whole = [name for name in self.whole if name in data]
        if not whole:
            return data
        return {**data, **{name: whole_number(data[name]) for name in whole}}

    def only(
        self, names: Iterable[str], title: str, description: str, extra: Callable[[], Schema] | None
    ) -> Body:
        """The body of some of these fields (another operation's, of the same meaning)."""
        kept = set(names)
        fields = tuple(f for f in self.fields if f.name in kept)
        return Body(title, description, fields, extra, self.unknown, self.nullable)

    def plus(self, *more: BodyField, title: str) -> Body:
        """This body with more fields (those an interface adds, e.g. the REST API's
        ``on_conflict``)."""
        fields = (*self.fields, *more)
        return Body(title, self.description, fields, self.extra, self.unknown, self.nullable)

    def json_schema(self) -> Schema:
        """The body's JSON Schema, as /openapi.json shows it."""
        schema: Schema = {
            "additionalProperties": False,
            "properties": {f.name: f.json_schema(self.nullable) for f in self.fields},
            "title": self.title,
            "type": "object",
        }
        if self.description is not None:
            schema["description"] = self.description
        if self.required:
            schema["required"] = [f.name for f in self.required]
        if self.extra is not None:
            schema.update(self.extra())
        return schema


PAYLOAD = BodyField(
    "payload",
    description="Any JSON, up to the payload size limit, with no NUL character (\\u0000) in its "
    "strings or keys",
)
"""A timer's or a schedule's payload: what its handler is given."""
SUBJECT = BodyField(
    "subject",
    {
        "anyOf": [
            {"type": "string", "pattern": identifier_pattern(), "maxLength": MAX_SUBJECT_LENGTH},
            {"type": "integer"},
        ]
    },
    "Who the timer is about; a number is read as its text",
    ("user-1234",),
)
"""Who a timer or a schedule is about."""
