"""Pure wall-clock <-> UTC arithmetic, so every DST decision is made in one place.

Semantics follow TC39 Temporal / RFC 5545 §3.3.5 / ``java.time``: a wall-clock time in a
spring-forward *gap* does not exist; a time in a fall-back *overlap* exists twice. The
``disambiguation`` names which instant the caller wants in each case.

Zones come from the ``tzdata`` package (not the host's ``/usr/share/zoneinfo``) so that the same
input gives the same instant on every machine; :func:`tzdata_version` says which release.
"""

from __future__ import annotations

import functools
import importlib
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duetime.errors import AmbiguousLocalTime, InvalidInput, NonexistentLocalTime, UnknownTimezone

Disambiguation = Literal["compatible", "earlier", "later", "reject"]
Classification = Literal["normal", "gap", "overlap"]

DISAMBIGUATIONS: tuple[Disambiguation, ...] = get_args(Disambiguation)

_MAX_ZONE_NAME = 64


def tzdata_version() -> str:
    """The IANA release of the ``tzdata`` package, recorded so results can be reproduced."""
    module = _tzdata_module()
    if module is None:  # pragma: no cover - tzdata is a declared dependency
        return "system"
    return str(getattr(module, "IANA_VERSION", "unknown"))


def parse_disambiguation(value: object, field: str = "disambiguation") -> Disambiguation:
    """Check a user's disambiguation name, so a typo is a clear error rather than a default."""
    for choice in DISAMBIGUATIONS:
        if value == choice:
            return choice
    allowed = ", ".join(repr(c) for c in DISAMBIGUATIONS)
    raise InvalidInput(field, f"must be one of {allowed}, not {value!r}")


def load_zone(name: str, field: str = "timezone") -> ZoneInfo:
    """Validate a user's IANA zone name and load it, so a bad name is a 4xx error and never a
    crash. Legacy names without an area (``EST``, ``EST5EDT``, ``CET``, ``Japan``) are refused
    as abbreviations are: ``EST`` is a fixed -05:00 that never follows New York's DST, which is
    rarely what its writer meant. ``UTC`` and ``Etc/*`` stay."""
    if not isinstance(name, str):
        raise InvalidInput(field, f"must be an IANA timezone name, not {type(name).__name__}")
    if "/" not in name and name != "UTC" and _plausible_zone_name(name):
        raise UnknownTimezone(field, f"{name!r} is not an IANA Area/City name{_legacy_hint(name)}")
    return stored_zone(name, field)


def stored_zone(name: str, field: str = "timezone") -> ZoneInfo:
    """Load a zone name as tzdata knows it, legacy names included: what a stored timer or
    schedule names was accepted when it was written and must keep resolving."""
    if not isinstance(name, str):
        raise InvalidInput(field, f"must be an IANA timezone name, not {type(name).__name__}")
    if not _plausible_zone_name(name):
        raise UnknownTimezone(field, f"unknown IANA timezone {name!r}")
    known = _tzdata_zone_names()
    if known is not None and name not in known:
        raise UnknownTimezone(field, f"unknown IANA timezone {name!r}{_suggest(name, known)}")
    try:
        return _load_zone_cached(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # pragma: no cover
        raise UnknownTimezone(field, f"unknown IANA timezone {name!r}") from exc


@functools.lru_cache(maxsize=1024)
def _load_zone_cached(name: str) -> ZoneInfo:
    """Load once per name: ``ZoneInfo.from_file`` does not share ``ZoneInfo``'s own cache."""
    if _tzdata_zone_names() is None:  # pragma: no cover - only without the tzdata package
        return ZoneInfo(name)
    resource = resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
    with resource.open("rb") as fobj:
        return ZoneInfo.from_file(fobj, key=name)


def zone_names() -> frozenset[str]:
    """Every zone name this build knows: tzdata's index, else the system's zoneinfo."""
    from zoneinfo import available_timezones

    return _tzdata_zone_names() or frozenset(available_timezones())


def _plausible_zone_name(name: str) -> bool:
    """Reject paths and control characters before anything touches the file system."""
    if not name or len(name) > _MAX_ZONE_NAME or name != name.strip():
        return False
    if name.startswith(("/", ".")) or "\\" in name or "\x00" in name:
        return False
    parts = name.split("/")
    return all(part and part not in (".", "..") and part.isprintable() for part in parts)


def _tzdata_module() -> object | None:
    try:
        return importlib.import_module("tzdata")
    except ImportError:  # pragma: no cover - tzdata is a declared dependency
        return None


@functools.lru_cache(maxsize=1)
def _tzdata_zone_names() -> frozenset[str] | None:
    """The zone keys the ``tzdata`` package ships, from its own index (not a directory walk)."""
    if _tzdata_module() is None:  # pragma: no cover
        return None
    text = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


_LEGACY_HINTS = {
    "EST": "America/New_York",
    "EST5EDT": "America/New_York",
    "CST6CDT": "America/Chicago",
    "MST": "America/Denver, or America/Phoenix (no DST)",
    "MST7MDT": "America/Denver",
    "PST8PDT": "America/Los_Angeles",
    "HST": "Pacific/Honolulu",
    "CET": "Europe/Paris or Europe/Berlin",
    "MET": "Europe/Paris or Europe/Berlin",
    "EET": "Europe/Athens or Europe/Helsinki",
    "WET": "Europe/Lisbon",
    "GMT": "UTC, or Europe/London for the UK's clock",
}


def _legacy_hint(name: str) -> str:
    """Which name to use instead of a legacy one, or the general rule."""
    hint = _LEGACY_HINTS.get(name.upper())
    if hint is not None:
        return f": use {hint}"
    return ": use a name such as America/New_York, UTC, or Etc/GMT+5 for a fixed offset"


def _suggest(name: str, known: frozenset[str]) -> str:
    """Point at the right spelling when only the case is wrong (``america/new_york``)."""
    folded = name.casefold()
    for candidate in sorted(known):
        if candidate.casefold() == folded:
            return f" (did you mean {candidate!r}?)"
    return ""


def is_aware(dt: datetime) -> bool:
    """True when ``dt`` names one instant, which is what the scheduler stores."""
    return dt.tzinfo is not None and dt.tzinfo.utcoffset(dt) is not None


def to_local(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive wall-clock time ``zone`` shows at ``instant`` (fold cleared: it is display)."""
    if not is_aware(instant):
        raise ValueError("to_local needs a timezone-aware instant")
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def classify(wall: datetime, zone: ZoneInfo) -> Classification:
    """Say whether ``wall`` occurs once, never (gap) or twice (overlap) in ``zone``."""
    return _resolve(wall, zone, "local")[0]


def gap_or_overlap_size(wall: datetime, zone: ZoneInfo) -> timedelta:
    """How far the clocks jumped around ``wall`` (zero when it is a normal time)."""
    kind, first, second = _resolve(wall, zone, "local")
    if kind == "normal":
        return timedelta(0)
    return abs(second - first)


def to_utc(
    wall: datetime,
    zone: ZoneInfo,
    disambiguation: Disambiguation = "compatible",
    field: str = "local",
) -> datetime:
    """Resolve a naive wall-clock time in ``zone`` to one UTC instant, by the Temporal rules."""
    choice = parse_disambiguation(disambiguation)
    kind, earlier, later = _resolve(wall, zone, field)
    if kind == "normal":
        return earlier
    shown = wall.replace(fold=0).isoformat()
    size = later - earlier
    if kind == "gap":
        if choice == "reject":
            raise NonexistentLocalTime(
                field,
                f"{shown} does not exist in {zone.key}: clocks jump forward {_span(size)} there; "
                "use disambiguation 'compatible', 'earlier' or 'later'",
            )
        # 'compatible' and 'later' read the time with the offset in force before the gap.
        return earlier if choice == "earlier" else later
    if choice == "reject":
        raise AmbiguousLocalTime(
            field,
            f"{shown} happens twice in {zone.key}: clocks go back {_span(size)} there; "
            "use disambiguation 'compatible', 'earlier' or 'later'",
        )
    return later if choice == "later" else earlier


def _resolve(
    wall: datetime, zone: ZoneInfo, field: str
) -> tuple[Classification, datetime, datetime]:
    """Round-trip both folds through UTC: (kind, earlier instant, later instant)."""
    if wall.tzinfo is not None:
        raise InvalidInput(field, "must be a naive wall-clock time; the zone is given separately")
    plain = wall.replace(fold=0)
    try:
        first = plain.replace(tzinfo=zone).astimezone(UTC)
        second = plain.replace(tzinfo=zone, fold=1).astimezone(UTC)
        first_back = first.astimezone(zone).replace(tzinfo=None, fold=0)
        second_back = second.astimezone(zone).replace(tzinfo=None, fold=0)
    except OverflowError as exc:
        raise InvalidInput(field, f"{plain.isoformat()} is out of the supported range") from exc
    earlier, later = min(first, second), max(first, second)
    first_ok, second_ok = first_back == plain, second_back == plain
    if first_ok and second_ok:
        return ("normal" if first == second else "overlap"), earlier, later
    if first_ok or second_ok:  # pragma: no cover - zoneinfo never splits folds this way
        only = first if first_ok else second
        return "normal", only, only
    return "gap", earlier, later


def _span(size: timedelta) -> str:
    """A gap or overlap length in words: '1 hour', '30 minutes', '1 day'."""
    seconds = int(size.total_seconds())
    if seconds % 60:
        return str(size)  # historical local-mean-time offsets are not whole minutes
    minutes = seconds // 60
    if minutes % (24 * 60) == 0:
        days = minutes // (24 * 60)
        return f"{days} day" + ("s" if days != 1 else "")
    if minutes % 60 == 0:
        hours = minutes // 60
        return f"{hours} hour" + ("s" if hours != 1 else "")
    return f"{minutes} minutes"
