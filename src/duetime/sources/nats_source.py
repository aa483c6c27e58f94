"""NATS JetStream source: a durable pull consumer whose messages become timers, acked after commit.

Messages are fetched in batches from a durable pull consumer (explicit acks) filtered on one
subject. Each batch goes through :func:`~duetime.sources.base.store_batch`: valid messages are
stored in one transaction and acked one by one once it committed; malformed ones are published
to the dead-letter subject (``<subject>.dead`` unless configured) and then acked; messages that
could not be stored because the store failed are ``nak``-ed with a delay, so JetStream
redelivers them later (``max_deliver`` is unlimited by default: a long database outage delays
timers, it does not drop them).

Dead letters carry the original body unchanged and these headers::

    Duetime-Dead-Reason    "dueAt: 2025-03-15T13:00:00 has no UTC offset; ..."
    Duetime-Dead-Code      "invalid_input" | "unknown_timezone" | ... (duetime's error code)
    Duetime-Dead-Field     "dueAt" (when the reason names one)
    Duetime-Source-Subject / -Stream / -Sequence   where the message came from
    Nats-Msg-Id            "dead:<stream>:<sequence>" (a redelivered bad message dies once)

A dead letter is published with JetStream and its PubAck awaited *before* the original is acked,
so a malformed message is never lost: if no stream captures the dead-letter subject, the original
is nak-ed and stays in its stream, and the error is logged.

A message without a key of its own (the ``timer`` mapping without ``key``) gets
``nats:<Nats-Msg-Id>``, or ``nats:<stream>:<sequence>`` if it has no ``Nats-Msg-Id``: a
redelivered message updates its timer rather than adding another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from duetime.app.facade import AsyncApp
from duetime.destinations.base import check_name, check_timeout
from duetime.destinations.config import check_nats_urls, check_path
from duetime.errors import InvalidInput
from duetime.sources.base import (
    BatchOutcome,
    Incoming,
    Rejection,
    ScheduleCommand,
    SourceStats,
    check_count,
    check_seconds,
    describe,
    message_key,
    one_line,
    record,
    sleep_until_stopped,
    store_batch,
)
from duetime.sources.checks import (
    check_dead_subject,
    check_durable,
    check_source_subject,
    check_stream_name,
    default_stream_name,
    subject_matches,
)
from duetime.support.redaction import redact_url

log = logging.getLogger("duetime.sources.nats")

DEFAULT_DURABLE = "duetime"
DEFAULT_BATCH = 100
DEFAULT_FETCH_TIMEOUT = 1.0
DEFAULT_RETRY_DELAY = 5.0
DEFAULT_ACK_WAIT = 30.0
DEFAULT_TIMEOUT = 5.0
MAX_RECONNECT_DELAY = 30.0


async def ensure_stream(js: JetStreamContext, name: str, subjects: Sequence[str]) -> None:
    """Create stream ``name`` capturing ``subjects``, or add the missing ones to an existing one.

    A subject that another stream already captures cannot be captured by ``name`` too (JetStream
    refuses overlapping streams): that is an :class:`InvalidInput` naming the other stream, so
    the log says what to change instead of repeating "stream not found"."""
    try:
        info = await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        try:
            await js.add_stream(name=name, subjects=list(subjects))
        except nats.js.errors.BadRequestError:
            await refuse_subjects_of_other_streams(js, name, subjects)
            info = await js.stream_info(name)  # created concurrently by another process
        else:
            return
    have = list(info.config.subjects or [])
    missing = [s for s in subjects if not any(subject_matches(h, s) for h in have)]
    if missing:
        info.config.subjects = have + missing
        await js.update_stream(info.config)


async def refuse_subjects_of_other_streams(
    js: JetStreamContext, name: str, subjects: Sequence[str]
) -> None:
    """Raise :class:`InvalidInput` when a stream other than ``name`` captures a subject."""
    for subject in subjects:
        try:
            owner = await js.find_stream_name_by_subject(subject)
        except nats.js.errors.NotFoundError:
            continue
        if owner != name:
            raise InvalidInput(
                "stream",
                f"subject {subject!r} is captured by the stream {owner!r}, so the stream {name!r} "
                f"cannot capture it too: set stream={owner!r} (and capture the dead-letter "
                "subject there), or choose a subject no other stream captures",
            )


class NatsSource:
    """Consumes schedule requests from a JetStream subject with a durable pull consumer."""

    def __init__(
        self,
        app: AsyncApp,
        url: str | Sequence[str],
        subject: str,
        *,
        command: ScheduleCommand | None = None,
        durable: str = DEFAULT_DURABLE,
        stream: str | None = None,
        create_stream: bool = False,
        dead_subject: str | None = None,
        batch: int = DEFAULT_BATCH,
        fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        ack_wait: float = DEFAULT_ACK_WAIT,
        max_deliver: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: str | None = None,
        name: str | None = None,
    ) -> None:
        self.app = app
        self.servers = check_nats_urls(url if isinstance(url, str) else list(url))
        self.subject = check_source_subject(subject)
        self.command = command or ScheduleCommand()
        self.durable = check_durable(durable)
        self.stream = None if stream is None else check_stream_name(stream)
        if create_stream and self.stream is None:
            self.stream = default_stream_name(self.subject)
        self.create_stream = create_stream
        if dead_subject is None:
            if {"*", ">"} & set(self.subject.split(".")):
                raise InvalidInput(
                    "dead_subject", "is required when the subject has a wildcard (no default)"
                )
            dead_subject = f"{self.subject}.dead"
        self.dead_subject = check_dead_subject(dead_subject)
        if subject_matches(self.subject, self.dead_subject):
            raise InvalidInput(
                "dead_subject",
                f"{self.dead_subject!r} matches the consumed subject {self.subject!r}: "
                "dead letters would be consumed again",
            )
        self.batch = check_count(batch, "batch")
        self.fetch_timeout = check_seconds(fetch_timeout, "fetch_timeout", maximum=60)
        self.retry_delay = check_seconds(retry_delay, "retry_delay")
        self.ack_wait = check_seconds(ack_wait, "ack_wait", minimum=0.5)
        if max_deliver is not None:
            max_deliver = check_count(max_deliver, "max_deliver", maximum=1_000_000)
        self.max_deliver = max_deliver
        self.timeout = check_timeout(timeout)
        self.credentials = None if credentials is None else check_path(credentials, "credentials")
        self.name = check_name(name or f"nats-{self.durable}")
        self.stats = SourceStats()
        self._nc: Client | None = None

    def __repr__(self) -> str:
        servers = ", ".join(redact_url(s) for s in self.servers)
        return f"NatsSource({self.name!r}, [{servers}], {self.subject!r}, durable={self.durable!r})"

    # -- running ----------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; connection failures are logged and retried."""
        delay = 0.5
        while not stop.is_set():
            try:
                subscription = await self._subscribe()
                delay = 0.5
                await self._consume(subscription, stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # InvalidInput here is the broker's set-up (no stream captures the subject yet):
                # someone may fix it while we wait, so it is retried like an outage, louder.
                level = logging.ERROR if isinstance(exc, InvalidInput) else logging.WARNING
                log.log(level, "source %s: %s; retrying in %.1fs", self.name, describe(exc), delay)
                await self._close()
                await sleep_until_stopped(stop, delay)
                delay = min(delay * 2, MAX_RECONNECT_DELAY)
        await self._close()

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        nc = self._nc
        if nc is None or nc.is_closed:
            nc = await self._connect()
        js = nc.jetstream(timeout=self.timeout)
        stream = self.stream
        if self.create_stream:
            assert stream is not None
            await ensure_stream(js, stream, [self.subject, self.dead_subject])
        elif stream is None:
            try:
                stream = await js.find_stream_name_by_subject(self.subject)
            except nats.js.errors.NotFoundError:
                raise InvalidInput(
                    "stream",
                    f"no JetStream stream captures {self.subject!r}; "
                    "create one or set create_stream",
                ) from None
        try:
            await js.consumer_info(stream, self.durable)
        except nats.js.errors.NotFoundError:
            config = api.ConsumerConfig(
                durable_name=self.durable,
                filter_subject=self.subject,
                ack_policy=api.AckPolicy.EXPLICIT,
                deliver_policy=api.DeliverPolicy.ALL,
                ack_wait=self.ack_wait,
                max_deliver=self.max_deliver or -1,
                max_ack_pending=max(1000, self.batch * 10),
            )
            await js.add_consumer(stream, config)
        log.info(
            "source %s: consuming %s (stream %s, consumer %s)",
            self.name,
            self.subject,
            stream,
            self.durable,
        )
        return await js.pull_subscribe_bind(durable=self.durable, stream=stream)

    async def _connect(self) -> Client:
        nc = Client()

        async def on_error(exc: Exception) -> None:
            """Log what nats-py reports in the background (it reconnects by itself)."""
            log.warning("source %s: NATS: %s", self.name, describe(exc))

        try:
            await asyncio.wait_for(
                nc.connect(
                    servers=self.servers,
                    name=f"duetime-source:{self.name}",
                    connect_timeout=max(1, round(self.timeout)),
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    user_credentials=self.credentials,
                    error_cb=on_error,
                ),
                self.timeout,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await nc.close()
            raise
        self._nc = nc
        return nc

    async def _close(self) -> None:
        """Flush the acks already sent, then close; never hang on the way out."""
        # Not drain(): a pull subscription's queue may hold a fetch's status reply that nobody
        # will read, and drain() would wait for it until its own timeout.
        nc, self._nc = self._nc, None
        if nc is None or nc.is_closed:
            return
        with contextlib.suppress(nats.errors.Error, OSError, TimeoutError):
            if nc.is_connected:
                await nc.flush(timeout=max(1, round(self.timeout)))
        with contextlib.suppress(Exception):
            await nc.close()

    async def _consume(
        self, subscription: JetStreamContext.PullSubscription, stop: asyncio.Event
    ) -> None:
        while not stop.is_set():
            nc = self._nc
            if nc is None or nc.is_closed:
                raise ConnectionError("the NATS connection is closed")
            try:
                messages = await subscription.fetch(self.batch, timeout=self.fetch_timeout)
            except nats.errors.TimeoutError:
                continue  # nothing to do: fetch again (and look at ``stop``)
            if not await self.handle(messages):
                # The store failed: give it time before fetching more.
                await sleep_until_stopped(stop, self.retry_delay)

    # -- one batch --------------------------------------------------------------------------
    async def handle(self, messages: Sequence[Msg]) -> bool:
        """Store, dead-letter and ack one batch; False when storing failed (messages nak-ed)."""
        items = [Incoming(msg, msg.data, self._default_key(msg), msg.headers) for msg in messages]
        outcome: BatchOutcome[Msg] = await store_batch(
            self.app, self.command, items, source=self.name
        )
        record(self.stats, outcome, self.name, len(items))
        for msg, _ in outcome.stored:
            await self._settle(msg.ack(), msg)
        for item, rejection in outcome.rejected:
            await self._dead_letter(item.handle, rejection)
        for msg in outcome.deferred:
            await self._settle(msg.nak(delay=self.retry_delay), msg)
        return not outcome.deferred

    async def _settle(self, call: Awaitable[object], msg: Msg) -> None:
        """Await an ack/nak; a lost one only means a harmless redelivery (keys are stable)."""
        try:
            await call
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            log.warning(
                "source %s: could not settle message %s: %s (it will be redelivered)",
                self.name,
                _sequence(msg),
                describe(exc),
            )

    async def _dead_letter(self, msg: Msg, rejection: Rejection) -> None:
        """Publish the original bytes and the reason durably, then ack; nak if that fails."""
        meta = msg.metadata
        headers = {
            k: v for k, v in (msg.headers or {}).items() if not k.lower().startswith("nats-")
        }
        headers.update(
            {
                "Nats-Msg-Id": f"dead:{meta.stream}:{meta.sequence.stream}",
                "Duetime-Dead-Reason": rejection.reason,
                "Duetime-Dead-Code": rejection.code,
                "Duetime-Source-Subject": one_line(msg.subject),
                "Duetime-Source-Stream": meta.stream,
                "Duetime-Source-Sequence": str(meta.sequence.stream),
            }
        )
        if rejection.field:
            headers["Duetime-Dead-Field"] = one_line(rejection.field)
        nc = self._nc
        try:
            if nc is None:
                raise ConnectionError("not connected")
            js = nc.jetstream(timeout=self.timeout)
            await js.publish(self.dead_subject, msg.data, timeout=self.timeout, headers=headers)
        except (nats.errors.Error, OSError, TimeoutError, ConnectionError) as exc:
            self.stats.dead_letter_failures += 1
            log.error(
                "source %s: could not dead-letter message %s to %s (%s); it stays in its stream "
                "and will be redelivered. Reason it is malformed: %s",
                self.name,
                meta.sequence.stream,
                self.dead_subject,
                describe(exc),
                rejection.reason,
            )
            await self._settle(msg.nak(delay=self.retry_delay), msg)
            return
        self.stats.dead_lettered += 1
        log.warning(
            "source %s: dead-lettered message %s (%s) to %s: %s",
            self.name,
            meta.sequence.stream,
            rejection.code,
            self.dead_subject,
            rejection.reason,
        )
        await self._settle(msg.ack(), msg)

    def _default_key(self, msg: Msg) -> str:
        msg_id = (msg.headers or {}).get("Nats-Msg-Id")
        if msg_id:
            return message_key("nats", msg_id)
        meta = msg.metadata
        return message_key("nats", f"{meta.stream}:{meta.sequence.stream}")


def _sequence(msg: Msg) -> str:
    try:
        return str(msg.metadata.sequence.stream)
    except Exception:  # not a JetStream message: nothing better to name it by
        return msg.subject
