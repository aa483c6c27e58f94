"""Store conformance, the audit log: entries written per namespace read back newest first in
pages, and the retention step deletes them with the event log's retention. Every test runs
against SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from storekit import NOW

from duetime.errors import InvalidInput
from duetime.model.audit import Actor, AuditRecord
from duetime.model.history import RetentionPolicy
from duetime.services.retention import maintain
from duetime.store import Store

POLICY = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))
ON_CALL = Actor("token:on-call", "api")


def record(namespace: str, action: str, count: int = 1) -> AuditRecord:
    target = {"filter": {"status": "dead", "type": "order.*"}, "keys": ["a", "b/c"]}
    return AuditRecord(namespace, ON_CALL, action, target, count)


async def test_entries_read_back_newest_first_in_pages_per_namespace(store: Store) -> None:
    await store.audit.record([record("ns", "bulk_replay", 120)], NOW)
    await store.audit.record([record("ns", "delete"), record("other", "cancel")], NOW)
    await store.audit.record([record("ns", "pause")], NOW + timedelta(seconds=1))
    first = await store.audit.list_entries("ns", None, 2)
    assert [e.action for e in first.items] == ["pause", "delete"]
    assert first.next_cursor is not None
    assert first.next_cursor.startswith("audit.")
    rest = await store.audit.list_entries("ns", first.next_cursor, 2)
    assert [e.action for e in rest.items] == ["bulk_replay"]
    assert rest.next_cursor is None
    (entry,) = rest.items
    assert entry.to_dict() == {
        "id": entry.id,
        "namespace": "ns",
        "at": "2025-03-01T12:00:00Z",
        "actor": "token:on-call",
        "via": "api",
        "action": "bulk_replay",
        "target": {"filter": {"status": "dead", "type": "order.*"}, "keys": ["a", "b/c"]},
        "count": 120,
    }
    other = await store.audit.list_entries("other", None, 10)
    assert [(e.namespace, e.action) for e in other.items] == [("other", "cancel")]
    with pytest.raises(InvalidInput, match="cursor"):
        await store.audit.list_entries("ns", "id.5", 10)


async def test_retention_deletes_entries_as_old_as_the_event_log_keeps(store: Store) -> None:
    await store.audit.record([record("ns", "old"), record("other", "old")], NOW)
    await store.audit.record([record("ns", "recent")], NOW + timedelta(days=20))
    report = await maintain(store, POLICY, NOW + timedelta(days=31))
    assert report.audit_deleted == 2
    assert report.changed
    left = await store.audit.list_entries("ns", None, 10)
    assert [e.action for e in left.items] == ["recent"]
    assert (await store.audit.list_entries("other", None, 10)).items == []
    again = await maintain(store, POLICY, NOW + timedelta(days=31))
    assert again.audit_deleted == 0
