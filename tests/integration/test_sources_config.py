"""Source mappings, batch storing and configuration, without brokers: bad input names its field."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import AsyncApp
from duetime.errors import InvalidInput, StoreUnavailable, UnknownTimezone
from duetime.sources import (
    ScheduleCommand,
    SourceSpec,
    build_source,
    parse_sources,
    sources_from_json,
)
from duetime.sources.base import Incoming, Rejection, message_key, one_line, store_batch
from duetime.store import create_store
from duetime.testing import make_app

SEED003 = ScheduleCommand.named("seed003")
SEED004 = ScheduleCommand.named("seed004", acceptance_window="PT5M")


@pytest.fixture
def app(tmp_path: Path) -> AsyncApp:
    return make_app(tmp_path, start="2025-03-01T12:00:00Z")


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def error_of(command: ScheduleCommand, app: AsyncApp, data: bytes) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        command.prepare(app, data, "fallback")
    return caught.value


# -- the default mapping: the body is a TimerRequest ------------------------------------------
def test_timer_mapping_takes_the_request_and_fills_a_missing_key(app: AsyncApp) -> None:
    command = ScheduleCommand()
    timer = command.prepare(app, body({"type": "a.b", "at": "2025-03-15T13:00:00Z"}), "nats:x")
    assert timer.key == "nats:x"
    assert timer.due_at == datetime(2025, 3, 15, 13, tzinfo=UTC)
    keyed = command.prepare(app, body({"type": "a.b", "delay": 60, "key": "mine"}), "nats:x")
    assert keyed.key == "mine"
    assert keyed.due_at == datetime(2025, 3, 1, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("data", "field", "code"),
    [
        (b"", "body", "invalid_input"),
        (b"\xff", "body", "invalid_input"),
        (b"{nope", "body", "invalid_input"),
        (b"[" * 100_000, "body", "invalid_input"),
        (b"[]", "body", "invalid_input"),
        (body({"at": "2025-03-15T13:00:00Z"}), "type", "invalid_input"),
        (body({"type": "a", "at": "2025-03-15T13:00:00Z", "colour": 1}), "colour", "invalid_input"),
        (body({"type": "a", "at": "2025-03-15T13:00:00"}), "at", "invalid_input"),
        (
            body({"type": "a", "local": "2025-03-15T09:00", "timezone": "Mars/Olympus"}),
            "timezone",
            "unknown_timezone",
        ),
        (body({"type": "a", "date": "2025-02-29"}), "date", "invalid_input"),
        (body({"type": "a", "delay": 1, "key": ""}), "key", "invalid_input"),
        (body({"type": "a", "delay": 0, "expires_after": 1e12}), "expires_after", "invalid_input"),
        (body({"type": "a", "delay": 0, "expires_after": 9e13}), "expires_after", "invalid_input"),
        (body({"type": "a", "at": "9500-01-01T00:00:00Z"}), "at", "invalid_input"),
    ],
)
def test_timer_mapping_refuses_bad_messages_naming_the_field(
    app: AsyncApp, data: bytes, field: str, code: str
) -> None:
    error = error_of(ScheduleCommand(), app, data)
    assert error.field == field
    assert error.code == code
    rejection = Rejection.from_error(error)
    assert rejection.reason.startswith(f"{field}: ")
    assert not rejection.reason.startswith(f"{field}: {field}:")  # the field is named once


# -- ScheduleTimer commands ------------------------------------------------------------------
def test_seed003_command_becomes_an_upsertable_due_time_reached_timer(app: AsyncApp) -> None:
    data = body({"tenantId": "t1", "serviceCallId": "sc-9", "dueAt": "2025-03-15T09:00:00-04:00"})
    timer = SEED003.prepare(app, data, "ignored")
    assert timer.key == "t1:sc-9"
    assert timer.type == "DueTimeReached"
    assert timer.due_at == datetime(2025, 3, 15, 13, tzinfo=UTC)
    assert timer.payload == {
        "tenantId": "t1",
        "serviceCallId": "sc-9",
        "dueAt": "2025-03-15T13:00:00Z",
    }
    assert timer.correlation_id == "sc-9"
    assert timer.subject == "t1"
    assert SEED003.on_conflict == "update"


def test_seed003_accepts_the_adr_envelope_and_epoch_millis(app: AsyncApp) -> None:
    millis = int(datetime(2025, 3, 15, 13, tzinfo=UTC).timestamp() * 1000)
    envelope = {
        "id": "env-1",
        "type": "ScheduleTimer",
        "tenantId": "t1",
        "correlationId": "req-7",
        "payload": {"serviceCallId": "sc-1", "dueTimeMs": millis},
    }
    timer = SEED003.prepare(app, body(envelope), "ignored")
    assert timer.key == "t1:sc-1"
    assert timer.correlation_id == "req-7"
    assert timer.due_at == datetime(2025, 3, 15, 13, tzinfo=UTC)


@pytest.mark.parametrize(
    ("command", "field"),
    [
        ({"serviceCallId": "s", "dueAt": "2025-03-15T13:00:00Z"}, "tenantId"),
        ({"tenantId": "a:b", "serviceCallId": "s", "dueAt": "2025-03-15T13:00:00Z"}, "tenantId"),
        ({"tenantId": "t", "dueAt": "2025-03-15T13:00:00Z"}, "serviceCallId"),
        ({"tenantId": "t", "serviceCallId": "s"}, "dueAt"),
        ({"tenantId": "t", "serviceCallId": "s", "dueAt": "2025-03-15T13:00:00"}, "dueAt"),
        ({"tenantId": "t", "serviceCallId": "s", "dueAt": 1741957200}, "dueAt"),
        ({"tenantId": "t", "serviceCallId": "s", "dueAt": "1900-01-01T00:00:00Z"}, "dueAt"),
        ({"tenantId": "t", "serviceCallId": "s", "dueTimeMs": "soon"}, "dueTimeMs"),
        ({"tenantId": "t", "serviceCallId": "s", "dueTimeMs": 10**20}, "dueTimeMs"),
        ({"tenantId": "t", "serviceCallId": "s", "dueTimeMs": 25 * 10**13}, "dueTimeMs"),
        (
            {"tenantId": "t", "serviceCallId": "s" * 300, "dueAt": "2025-03-15T13:00:00Z"},
            "serviceCallId",
        ),
        ({"type": "Cancel", "payload": {}}, "type"),
        ({"tenantId": "t", "payload": {"serviceCallId": "s"}}, "payload.dueAt"),
    ],
)
def test_seed003_refuses_bad_commands_naming_the_field(
    app: AsyncApp, command: dict[str, Any], field: str
) -> None:
    assert error_of(SEED003, app, body(command)).field == field


# -- schedule-event messages -----------------------------------------------------------------
def test_seed004_event_keeps_the_whole_event_and_the_window(app: AsyncApp) -> None:
    event = {
        "id": 42,
        "createdDate": "2025-10-31T10:00:00Z",
        "executionDate": "2025-10-31T10:03:00Z",
        "userId": 789,
        "status": "PENDING",
    }
    timer = SEED004.prepare(app, body(event), "ignored")
    assert timer.key == "notification:42"
    assert timer.type == "delayed-notification"
    assert timer.payload == event
    assert timer.subject == "789"
    assert timer.expires_after == timedelta(minutes=5)
    assert ScheduleCommand.named("seed004").prepare(app, body(event), "x").expires_after is None


@pytest.mark.parametrize(
    ("event", "field", "code"),
    [
        ({"executionDate": "2025-10-31T10:03:00Z"}, "id", "invalid_input"),
        ({"id": "e"}, "executionDate", "invalid_input"),
        ({"id": "e", "executionDate": "2025-10-31T10:03:00"}, "executionDate", "invalid_input"),
        (
            {"id": "e", "executionDate": "2025-10-31T10:03:00Z", "userId": [1]},
            "userId",
            "invalid_input",
        ),
    ],
)
def test_seed004_refuses_bad_events_naming_the_field(
    app: AsyncApp, event: dict[str, Any], field: str, code: str
) -> None:
    error = error_of(SEED004, app, body(event))
    assert (error.field, error.code) == (field, code)


def test_mapping_options_are_checked() -> None:
    with pytest.raises(InvalidInput, match="acceptance_window"):
        ScheduleCommand.named("seed003", acceptance_window="PT5M")
    with pytest.raises(InvalidInput, match="mapping"):
        ScheduleCommand.named("kafka")
    with pytest.raises(InvalidInput, match="type"):
        ScheduleCommand.named("timer", type="x")
    with pytest.raises(InvalidInput, match="acceptance_window"):
        ScheduleCommand.named("seed004", acceptance_window="-PT5M")
    with pytest.raises(InvalidInput, match="on_conflict"):
        ScheduleCommand.named("seed003", on_conflict="merge")  # type: ignore[arg-type]


def test_message_keys_stay_valid_keys() -> None:
    assert message_key("nats", "abc") == "nats:abc"
    long = message_key("nats", "x" * 400)
    assert len(long) < 100
    assert long.startswith("nats:sha256:")
    assert message_key("nats", "a\nb").startswith("nats:sha256:")
    assert one_line("a\r\nb\tc") == "a  b c"
    assert len(one_line("x" * 5000)) == 1000


def test_unknown_timezone_keeps_its_code_when_renamed(app: AsyncApp) -> None:
    data = body({"type": "a", "local": "2025-03-15T09:00", "timezone": "Mars/Olympus"})
    assert isinstance(error_of(ScheduleCommand(), app, data), UnknownTimezone)


# -- configuration ----------------------------------------------------------------------------
CONFIG: dict[str, Any] = {
    "service-calls": {
        "kind": "nats",
        "url": "nats://user:secret@127.0.0.1:4222",
        "subject": "service-calls.schedule-timer",
        "create_stream": True,
        "mapping": "seed003",
        "batch": 50,
    },
    "notifications": {
        "kind": "redis",
        "url": "redis://127.0.0.1:6379/0",
        "stream": "schedule-event",
        "group": "scheduling-worker",
        "mapping": "seed004",
        "acceptance_window": "PT5M",
        "claim_idle": 30,
    },
}


def test_parse_and_build_sources(app: AsyncApp) -> None:
    specs = parse_sources(CONFIG)
    assert set(specs) == {"service-calls", "notifications"}
    assert specs["service-calls"].to_dict()["url"] == ["nats://user:***@127.0.0.1:4222"]
    assert "secret" not in repr(specs["service-calls"])
    nats_source = build_source(specs["service-calls"], app)
    assert nats_source.name == "service-calls"
    assert type(nats_source).__name__ == "NatsSource"
    assert nats_source.dead_subject == "service-calls.schedule-timer.dead"  # type: ignore[attr-defined]
    redis_source = build_source(specs["notifications"], app)
    assert type(redis_source).__name__ == "RedisSource"
    command = redis_source.command  # type: ignore[attr-defined]
    assert command.mapping.acceptance_window == timedelta(minutes=5)
    assert redis_source.dead_stream == "schedule-event:dead"  # type: ignore[attr-defined]
    built = sources_from_json(json.dumps(CONFIG), app)
    assert [s.name for s in built] == ["service-calls", "notifications"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "kinesis"}, "sources.service-calls.kind"),
        ({"subjet": "x"}, "sources.service-calls.subjet"),
        ({"subject": None}, "sources.service-calls.subject"),
        ({"subject": "a..b"}, "sources.service-calls.subject"),
        ({"url": "http://x"}, "sources.service-calls.url[0]"),
        ({"batch": 0}, "sources.service-calls.batch"),
        ({"create_stream": "yes"}, "sources.service-calls.create_stream"),
        ({"mapping": "seed005"}, "sources.service-calls.mapping"),
        ({"acceptance_window": "PT5M"}, "sources.service-calls.acceptance_window"),
        ({"type": "bad type!"}, "sources.service-calls.type"),
        ({"on_conflict": "merge"}, "sources.service-calls.on_conflict"),
        ({"dead_subject": "x.*"}, "sources.service-calls.dead_subject"),
        ({"fetch_timeout": -1}, "sources.service-calls.fetch_timeout"),
    ],
)
def test_bad_nats_source_config_names_the_field(change: dict[str, Any], field: str) -> None:
    raw = {"service-calls": {**CONFIG["service-calls"], **change}}
    with pytest.raises(InvalidInput) as caught:
        parse_sources(raw)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"stream": ""}, "sources.notifications.stream"),
        ({"claim_idle": "1m"}, "sources.notifications.claim_idle"),
        ({"start_id": "latest"}, "sources.notifications.start_id"),
        ({"acceptance_window": "soon"}, "sources.notifications.acceptance_window"),
        ({"group": "a\nb"}, "sources.notifications.group"),
    ],
)
def test_bad_redis_source_config_names_the_field(change: dict[str, Any], field: str) -> None:
    raw = {"notifications": {**CONFIG["notifications"], **change}}
    with pytest.raises(InvalidInput) as caught:
        parse_sources(raw)
    assert caught.value.field == field


def test_config_shape_errors(app: AsyncApp) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_sources([])
    assert caught.value.field == "sources"
    with pytest.raises(InvalidInput) as caught:
        parse_sources({"bad name!": {"kind": "nats"}})
    assert caught.value.field == "sources.bad name!"
    with pytest.raises(InvalidInput) as caught:
        SourceSpec.from_dict({"kind": "redis", "url": "redis://x"}, name="n", path="s.n")
    assert caught.value.field == "s.n.stream"
    with pytest.raises(InvalidInput) as caught:
        sources_from_json("{", app)
    assert caught.value.field == "sources"


# -- storing a batch --------------------------------------------------------------------------
class RefusingStore:
    """The real store, except that a batch holding the key ``refused`` is refused as bad input."""

    def __init__(self, inner: Any, *, down: bool = False) -> None:
        self._inner = inner
        self.down = down
        self.batches: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def put_timers(self, timers: Any, on_conflict: Any, now: Any) -> Any:
        self.batches.append([t.key for t in timers])
        if self.down:
            raise StoreUnavailable("connection refused")
        if any(t.key == "refused" for t in timers):
            raise InvalidInput("payload", "PostgreSQL cannot store this value")
        return await self._inner.put_timers(timers, on_conflict, now)


def refusing_app(tmp_path: Path, *, down: bool = False) -> tuple[AsyncApp, RefusingStore]:
    base = make_app(tmp_path, start="2025-03-01T12:00:00Z")
    store = RefusingStore(create_store(base.settings.database_url), down=down)
    return AsyncApp(settings=base.settings, clock=base.clock, store=store), store


def incoming(*keys: str | None) -> list[Incoming[str]]:
    return [
        Incoming(f"m{i}", body({"type": "a", "delay": 60, "key": key}) if key else b"{", f"d{i}")
        for i, key in enumerate(keys)
    ]


def test_store_batch_stores_the_good_in_one_transaction_and_rejects_the_bad(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        app, store = refusing_app(tmp_path)
        async with app:
            outcome = await store_batch(
                app, ScheduleCommand(), incoming("a", None, "b"), source="t"
            )
        assert [(h, r.action) for h, r in outcome.stored] == [("m0", "created"), ("m2", "created")]
        assert [(i.handle, r.field) for i, r in outcome.rejected] == [("m1", "body")]
        assert outcome.deferred == []
        assert store.batches == [["a", "b"]]  # one transaction for the valid ones

    asyncio.run(main())


def test_store_batch_isolates_a_message_the_store_refuses(tmp_path: Path) -> None:
    async def main() -> None:
        app, store = refusing_app(tmp_path)
        async with app:
            outcome = await store_batch(
                app, ScheduleCommand(), incoming("a", "refused", "b"), source="t"
            )
        assert [h for h, _ in outcome.stored] == ["m0", "m2"]
        ((item, rejection),) = outcome.rejected
        assert (item.handle, rejection.field, rejection.code) == ("m1", "payload", "invalid_input")
        assert store.batches == [["a", "refused", "b"], ["a"], ["refused"], ["b"]]

    asyncio.run(main())


def test_store_batch_defers_everything_while_the_store_is_down(tmp_path: Path) -> None:
    async def main() -> None:
        app, _ = refusing_app(tmp_path)
        async with app:
            app.store.down = True  # type: ignore[attr-defined]
            outcome = await store_batch(app, ScheduleCommand(), incoming("a", None), source="t")
        assert outcome.stored == []
        assert [i.handle for i, _ in outcome.rejected] == ["m1"]  # bad input is still bad
        assert outcome.deferred == ["m0"]
        assert isinstance(outcome.error, StoreUnavailable)

    asyncio.run(main())


def test_on_conflict_error_rejects_an_existing_key(tmp_path: Path) -> None:
    async def main() -> None:
        async with make_app(tmp_path) as app:
            await app.schedule("a", delay=60, key="taken")
            command = ScheduleCommand(on_conflict="error")
            outcome = await store_batch(app, command, incoming("taken", "free"), source="t")
        assert [h for h, _ in outcome.stored] == ["m1"]
        ((item, rejection),) = outcome.rejected
        assert (item.handle, rejection.code) == ("m0", "already_exists")

    asyncio.run(main())
