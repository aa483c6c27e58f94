"""Already-migrated PostgreSQL schemas that tests take turns on, one pool per test process.

Creating a schema and applying every migration costs about 125 ms of server work, and dropping
it 25 ms more: paid by each of several hundred tests, that is minutes of a run (and, with
autovacuum off on the test server, ever more dead rows in its catalogs). A test takes a schema
from the pool instead (one is made when none is free) and gives it back once the test and all
its fixtures have ended (its stores closed, its processes stopped, whatever their order). The
schema goes back only when the next test cannot tell it from a new one:

- no session can still be using it: no PostgreSQL connection this process opened since the
  schema was handed out is still open, no process started since then descends from this one
  or names the schema (command line or environment), and no server backend holds a lock on
  its tables or one of the store's advisory locks of the schema;
- its catalog (tables, columns, defaults, indexes, constraints, triggers, functions, views,
  types, partitions, comments, privileges, storage options, objects elsewhere tied to its
  tables...) is the one the migrations made, compared line by line with the schema's name left
  out: a test that added a partition, dropped a table or altered anything leaves a schema that
  is dropped instead;
- once emptied (``TRUNCATE ... RESTART IDENTITY`` of the tables written to, all but
  ``schema_migrations``), its planner figures and statistics counters put back, its state is
  a freshly migrated schema's: the size of every table and index, the planner's figures, no
  statistics from an ANALYZE, every sequence unused, and the rows the migrations wrote exactly
  as they wrote them.

Anything else is dropped, as each test's schema was before the pool. Tests that need a schema
that does not exist yet (the migrations, concurrent starters, a store opened without migrating)
take a brand-new name instead (``storekit.fresh_schema``). When the test process ends, the
pooled schemas are dropped (:meth:`SchemaPool.close`, called at the end of the test session).

Sessions are found through Linux's ``/proc``; elsewhere, or with a server not reached over TCP,
nothing is pooled and every test gets a new schema, as before. Resetting writes the planner's
figures into ``pg_class`` and resets statistics counters: the test server's user must be a
superuser (``DUETIME_TEST_PG``'s default user, ``postgres``, is); without that, every schema is
dropped after its test, as before.
``DUETIME_TEST_POOL_LOG=<file>`` appends a line there for each schema dropped (the test, why).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

T = TypeVar("T")

ADVISORY_LOCKS = ("migrate", "tokens", "partitions", "namespaces")
"""The store's advisory locks of a schema, ``duetime:<name>:<schema>``: their holder still
works in the schema."""
KEPT_TABLES = ("schema_migrations",)
"""Tables whose rows the migrations write: kept as they are, and checked unchanged."""
LOCK_TIMEOUT = "2s"
"""How long emptying the tables waits for a lock before the schema is dropped instead."""

_OBJECTS = """
WITH ns AS (SELECT oid, nspowner, nspacl FROM pg_namespace WHERE nspname = %(schema)s),
inside AS (
    SELECT d.classid, d.objid FROM pg_depend d, ns
    WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = ns.oid
),
tied AS (
    SELECT d.classid, d.objid, d.objsubid, d.refobjid, d.refobjsubid, d.deptype
    FROM pg_depend d
    WHERE d.refclassid = 'pg_class'::regclass
        AND d.refobjid IN (SELECT objid FROM inside WHERE classid = 'pg_class'::regclass)
),
rels AS (
    SELECT c.* FROM pg_class c
    WHERE c.oid IN (SELECT objid FROM inside WHERE classid = 'pg_class'::regclass
                    UNION SELECT objid FROM tied WHERE classid = 'pg_class'::regclass)
        AND c.relnamespace <> 'pg_toast'::regnamespace
)
"""
"""The schema's objects, found through their dependencies (indexed; the catalogs of a server
without autovacuum are mostly dead rows, slow to scan): what is in the namespace, what depends
on those relations (indexes, constraints, triggers, rules, sequences, partitions, wherever they
are), and the relations among both (not TOAST tables, named after their table's oid)."""

CATALOG = (
    _OBJECTS
    + """
SELECT 'schema' AS kind, ROW(ns.nspowner::regrole, ns.nspacl)::text AS line FROM ns
UNION ALL
SELECT 'object', ROW(pg_describe_object(classid, objid, 0), 'in the schema')::text
FROM inside
UNION ALL
SELECT 'object', ROW(pg_describe_object(t.classid, t.objid, t.objsubid),
    pg_describe_object('pg_class'::regclass, t.refobjid, t.refobjsubid), t.deptype)::text
FROM tied t
WHERE t.classid <> 'pg_class'::regclass OR t.objid IN (SELECT oid FROM rels)
UNION ALL
SELECT 'relation', ROW(relname, relkind, relpersistence, relowner::regrole, relacl,
    reloptions, relam, reltablespace, relnatts, relchecks, relhasrules, relhastriggers,
    relrowsecurity, relforcerowsecurity, relreplident, relispartition, relispopulated,
    reloftype, pg_get_expr(relpartbound, oid), pg_get_partkeydef(oid),
    CASE WHEN relkind IN ('v', 'm') THEN pg_get_viewdef(oid) END)::text
FROM rels
UNION ALL
SELECT 'column', ROW(c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
    a.attnotnull, a.atthasdef, a.attidentity, a.attgenerated, a.attisdropped, a.attislocal,
    a.attinhcount, a.attcollation, a.attstattarget, a.attstorage, a.attcompression,
    a.attfdwoptions, a.attacl,
    ARRAY(SELECT o FROM unnest(a.attoptions) AS o WHERE o NOT LIKE 'pg_attver=%%'),
    (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
     WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum))::text
FROM rels c JOIN pg_attribute a ON a.attrelid = c.oid
WHERE a.attnum > 0
UNION ALL
SELECT 'index', ROW(pg_get_indexdef(i.indexrelid), i.indisunique, i.indisprimary,
    i.indisexclusion, i.indimmediate, i.indisclustered, i.indisvalid, i.indisready,
    i.indislive, i.indisreplident, i.indnullsnotdistinct)::text
FROM pg_index i WHERE i.indexrelid IN (SELECT oid FROM rels WHERE relkind IN ('i', 'I'))
UNION ALL
SELECT 'constraint', ROW(k.conname, k.contype, k.conrelid::regclass, k.confrelid::regclass,
    pg_get_constraintdef(k.oid), k.condeferrable, k.condeferred, k.convalidated,
    k.conislocal, k.coninhcount, k.connoinherit)::text
FROM pg_constraint k
WHERE k.oid IN (SELECT objid FROM tied WHERE classid = 'pg_constraint'::regclass
                UNION SELECT objid FROM inside WHERE classid = 'pg_constraint'::regclass)
UNION ALL
SELECT 'trigger', ROW(pg_get_triggerdef(g.oid), g.tgenabled)::text
FROM pg_trigger g
WHERE g.oid IN (SELECT objid FROM tied WHERE classid = 'pg_trigger'::regclass)
UNION ALL
SELECT 'rule', ROW(r.rulename, r.ev_enabled, pg_get_ruledef(r.oid))::text
FROM pg_rewrite r
WHERE r.oid IN (SELECT objid FROM tied WHERE classid = 'pg_rewrite'::regclass)
UNION ALL
SELECT 'policy', ROW(p.polname, p.polrelid::regclass, p.polcmd, p.polpermissive, p.polroles,
    pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))::text
FROM pg_policy p
WHERE p.oid IN (SELECT objid FROM tied WHERE classid = 'pg_policy'::regclass)
UNION ALL
SELECT 'inherits', ROW(h.inhrelid::regclass, h.inhparent::regclass, h.inhseqno)::text
FROM pg_inherits h
WHERE h.inhrelid IN (SELECT oid FROM rels) OR h.inhparent IN (SELECT oid FROM rels)
UNION ALL
SELECT 'sequence', ROW(q.seqrelid::regclass, q.seqtypid::regtype, q.seqstart,
    q.seqincrement, q.seqmax, q.seqmin, q.seqcache, q.seqcycle)::text
FROM pg_sequence q WHERE q.seqrelid IN (SELECT oid FROM rels WHERE relkind = 'S')
UNION ALL
SELECT 'function', ROW(p.oid::regprocedure, p.prokind, p.proowner::regrole, p.proacl,
    CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) END)::text
FROM pg_proc p WHERE p.oid IN (SELECT objid FROM inside WHERE classid = 'pg_proc'::regclass)
UNION ALL
SELECT 'type', ROW(t.typname, t.typtype, t.typcategory, t.typowner::regrole, t.typacl,
    t.typnotnull, t.typbasetype::regtype, t.typdefault)::text
FROM pg_type t
WHERE t.oid IN (SELECT objid FROM inside WHERE classid = 'pg_type'::regclass
                UNION SELECT objid FROM tied WHERE classid = 'pg_type'::regclass)
UNION ALL
SELECT 'statistics', ROW(pg_get_statisticsobjdef(x.oid))::text
FROM pg_statistic_ext x
WHERE x.oid IN (SELECT objid FROM inside WHERE classid = 'pg_statistic_ext'::regclass
                UNION SELECT objid FROM tied WHERE classid = 'pg_statistic_ext'::regclass)
UNION ALL
SELECT 'default privileges', ROW(a.defaclrole::regrole, a.defaclobjtype, a.defaclacl)::text
FROM pg_default_acl a, ns WHERE a.defaclnamespace = ns.oid
UNION ALL
SELECT 'comment', ROW(pg_describe_object(m.classoid, m.objoid, m.objsubid), m.description)::text
FROM pg_description m
WHERE m.objoid IN (SELECT objid FROM inside UNION SELECT objid FROM tied
                   UNION SELECT oid FROM rels UNION SELECT oid FROM ns)
"""
)
"""Every object of the schema and every object elsewhere tied to its tables, one line each
(``attoptions``' ``pg_attver`` entry, which some servers keep there, differs between two
schemas made alike: it is left out)."""

STATE = (
    _OBJECTS
    + """
SELECT 'relation' AS kind, ROW(relname, relpages, reltuples, relallvisible, relhasindex,
    relhassubclass,
    CASE WHEN relkind IN ('r', 'i', 'S', 'm') THEN pg_relation_size(oid) END,
    CASE WHEN reltoastrelid <> 0 THEN pg_relation_size(reltoastrelid) END,
    CASE WHEN relkind IN ('r', 'i', 'm') THEN pg_relation_size(oid, 'fsm') END,
    CASE WHEN relkind IN ('r', 'm') THEN pg_relation_size(oid, 'vm') END,
    CASE WHEN relkind = 'S' THEN pg_sequence_last_value(oid) END,
    (SELECT count(*) FROM pg_statistic t WHERE t.starelid = rels.oid),
    (SELECT count(*) FROM pg_statistic_ext x JOIN pg_statistic_ext_data d ON d.stxoid = x.oid
     WHERE x.stxrelid = rels.oid))::text AS line
FROM rels
"""
)
"""What a test could see of the schema besides its catalog and rows: file sizes, the planner's
figures, statistics left by ANALYZE, and how far each sequence went."""

PLANNER_FIGURES = _OBJECTS + "SELECT relname, relpages, reltuples, relallvisible FROM rels"

WRITTEN = (
    _OBJECTS
    + """
SELECT c.relname FROM rels c
WHERE c.relkind = 'r' AND c.relname <> ALL(%(kept)s) AND (
    pg_relation_size(c.oid) > 0
    OR EXISTS (SELECT 1 FROM pg_depend d JOIN pg_class q ON q.oid = d.objid
               WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = c.oid
                   AND d.classid = 'pg_class'::regclass
                   AND CASE WHEN q.relkind = 'S' THEN pg_sequence_last_value(q.oid) END
                       IS NOT NULL))
ORDER BY c.relname
"""
)
"""The tables a test wrote to (or whose sequence it used), but those the migrations wrote."""

RESTORE = (
    _OBJECTS
    + """
, fresh AS (
    SELECT * FROM unnest(%(names)s::text[], %(pages)s::integer[], %(tuples)s::real[],
                         %(visible)s::integer[]) AS f(relname, relpages, reltuples, relallvisible)
)
UPDATE pg_class c
SET relpages = f.relpages, reltuples = f.reltuples, relallvisible = f.relallvisible
FROM fresh f
WHERE c.oid IN (SELECT oid FROM rels) AND c.relname = f.relname
    AND (c.relpages, c.reltuples, c.relallvisible)
        IS DISTINCT FROM (f.relpages, f.reltuples, f.relallvisible)
"""
)
"""Put back the planner's figures of a new schema: TRUNCATE leaves an index as never built
(0 pages, -1 rows) where CREATE INDEX on the empty table left 1 page and 0 rows, and the planner
estimates a partial index from them."""

RESET_COUNTERS = _OBJECTS + "SELECT pg_stat_reset_single_table_counters(oid) FROM rels"

IN_USE = (
    _OBJECTS
    + """
SELECT 'lock' AS kind, l.pid, l.mode FROM pg_locks l
WHERE l.relation IN (SELECT oid FROM rels)
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.pid IS DISTINCT FROM pg_backend_pid()
UNION ALL
SELECT 'advisory lock', l.pid, l.mode FROM pg_locks l
WHERE l.locktype = 'advisory'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND (l.classid::bigint << 32 | l.objid::bigint) IN (
        SELECT hashtextextended(format('duetime:%%s:%%s', name, %(schema)s::text), 0)
        FROM unnest(%(locks)s::text[]) AS name)
    AND l.pid IS DISTINCT FROM pg_backend_pid()
"""
)
"""Server backends still working in the schema (a lock on one of its relations, or one of
the store's advisory locks for it): a test's process may be gone while its backend finishes
a statement."""


@dataclass(frozen=True)
class _Taken:
    """A schema out of the pool: when it was handed out, and what this process had then."""

    since_ticks: float
    last_pid: int
    own_connections: frozenset[int]


@dataclass
class Stats:
    """What the pool did: schemas made, handed out again, put back, and dropped (why)."""

    made: int = 0
    reused: int = 0
    returned: int = 0
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Fresh:
    """What every schema handed out must look like: the first one, as the migrations left it."""

    catalog: list[str]
    state: list[str]
    planner_figures: dict[str, tuple[int, float, int]]


class SchemaPool:
    """Migrated schemas of the test server, reused by one process's tests one after another."""

    def __init__(self, url: str, *, prefix: str = "t_") -> None:
        self.url = url
        self.prefix = prefix
        self.stats = Stats()
        self._free: list[str] = []
        self._taken: dict[str, _Taken] = {}
        self._ending: list[str] = []
        self._kept: dict[str, list[tuple[Any, ...]]] = {}
        self._users: dict[str, str] = {}  # the test that took each schema last
        self._fresh: _Fresh | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._port = _tcp_port(url)
        self.enabled = self._port is not None and os.path.isdir("/proc/self/fd")

    @property
    def free(self) -> tuple[str, ...]:
        """The schemas waiting in the pool, the next one to be handed out last."""
        return tuple(self._free)

    # -- handing out and taking back -------------------------------------------------------
    def take(self) -> str:
        """A migrated schema no other test is using, as fresh as a new one."""
        if self._free:
            schema = self._free.pop()
            self.stats.reused += 1
        else:
            schema = self._make()
        self._users[schema] = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        if self.enabled:
            self._taken[schema] = _Taken(_boot_ticks(), _last_pid(), self._own_connections())
        return schema

    def give_back(self, schema: str) -> bool:
        """Pool ``schema`` again if it is unused and made as fresh as a new one (True);
        otherwise drop it (False)."""
        reason = "not pooled" if schema not in self._taken else self._why_not_reusable(schema)
        self._taken.pop(schema, None)
        if reason is None:
            self._free.append(schema)
            self.stats.returned += 1
            return True
        self.stats.dropped[reason] = self.stats.dropped.get(reason, 0) + 1
        self._log(f"dropped {schema} of {self._users.pop(schema, None)}: {reason}")
        self._kept.pop(schema, None)
        drop_schema(self.url, schema)
        return False

    def give_back_later(self, schema: str) -> None:
        """Give ``schema`` back at :meth:`settle`: when the test has ended, every fixture of it
        finished (stores closed, processes stopped) whatever order they were set up in."""
        self._ending.append(schema)

    def settle(self) -> None:
        """Give back the schemas of :meth:`give_back_later` (the test has ended)."""
        ending, self._ending = self._ending, []
        with contextlib.ExitStack() as each:  # all of them, whichever fails
            for schema in ending:
                each.callback(self.give_back, schema)

    def close(self) -> None:
        """Drop every schema of the pool (the test process is ending), and any still handed
        out (a fixture that never gave its schema back)."""
        self.settle()
        free, self._free = [*self._free, *self._taken], []
        self._taken.clear()
        self._log(f"closed: {self.stats}")
        for schema in free:
            self._kept.pop(schema, None)
            drop_schema(self.url, schema)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _log(self, line: str) -> None:
        """Append ``line`` to the file ``DUETIME_TEST_POOL_LOG`` names, if any: which tests
        left a schema that could not be used again, and why."""
        path = os.environ.get("DUETIME_TEST_POOL_LOG")
        if path:
            with open(path, "a") as log:
                log.write(f"{os.getpid()} {line}\n")

    # -- what a test could tell apart ------------------------------------------------------
    def catalog(self, schema: str) -> list[str]:
        """The schema's catalog, one sorted line per object, its name written ``<schema>``."""
        return self._lines(CATALOG, schema)

    def state(self, schema: str) -> list[str]:
        """Sizes, planner figures, statistics and sequences of the schema's relations."""
        return self._lines(STATE, schema)

    def kept_rows(self, schema: str) -> list[tuple[Any, ...]]:
        """The rows the migrations wrote, every column."""
        query = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {}, to_jsonb(t)::text FROM {} AS t").format(
                sql.Literal(table), sql.Identifier(schema, table)
            )
            for table in KEPT_TABLES
        )

        def read(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return sorted(tuple(row) for row in conn.execute(query))

        return self._admin(read)

    def in_use(self, schema: str) -> str | None:
        """Who may still use ``schema``, handed out by :meth:`take` (None: no one)."""
        taken = self._taken[schema]
        if self._own_connections() - taken.own_connections:
            return "a connection this process opened during the test is still open"
        if _processes_on(schema, taken.since_ticks, taken.last_pid):
            return "a process started during the test still runs"
        if self._admin(lambda c: c.execute(IN_USE, self._params(schema)).fetchall()):
            return "a server backend still works in it"
        return None

    def _why_not_reusable(self, schema: str) -> str | None:
        """None when ``schema`` is unused and, emptied, as fresh as a new one; else why not."""
        assert self._fresh is not None  # made with the first schema
        try:
            user = self.in_use(schema)
            if user is not None:
                return user
            if self.catalog(schema) != self._fresh.catalog:
                return "its catalog changed"
            self._empty(schema)
            if self.state(schema) != self._fresh.state:
                return "its state differs from a new schema's"
            if self.kept_rows(schema) != self._kept[schema]:
                return "the migrations' rows changed"
        except psycopg.errors.LockNotAvailable:
            return "its tables stayed locked"
        except psycopg.Error as exc:
            return f"checking it failed: {type(exc).__name__}: {exc}"
        return None

    def _empty(self, schema: str) -> None:
        """Empty the tables written to (restarting their sequences), put the planner's figures
        of a new schema back, and reset every relation's statistics counters."""
        assert self._fresh is not None
        figures = self._fresh.planner_figures
        restore = {
            **self._params(schema),
            "names": list(figures),
            "pages": [pages for pages, _, _ in figures.values()],
            "tuples": [tuples for _, tuples, _ in figures.values()],
            "visible": [visible for _, _, visible in figures.values()],
        }

        def run(conn: psycopg.Connection[Any]) -> None:
            tables = [row[0] for row in conn.execute(WRITTEN, self._params(schema))]
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                # No wait for the WAL flush: only a crash of the server in the next moments
                # could undo this, and the tests never crash the shared server.
                conn.execute("SET LOCAL synchronous_commit = off")
                if tables:
                    names = sql.SQL(", ").join(sql.Identifier(schema, t) for t in tables)
                    conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(names))
                conn.execute(RESTORE, restore)
            conn.execute(RESET_COUNTERS, self._params(schema))

        self._admin(run)

    # -- making a schema -------------------------------------------------------------------
    def _make(self) -> str:
        """A new schema, migrated by the store's own code, as a store's start does it."""
        schema = f"{self.prefix}{uuid.uuid4().hex[:16]}"
        _in_new_loop(lambda: _migrate(self.url, schema))
        self.stats.made += 1
        if self.enabled:
            self._kept[schema] = self.kept_rows(schema)
            if self._fresh is None:
                figures = self._admin(
                    lambda c: c.execute(PLANNER_FIGURES, self._params(schema)).fetchall()
                )
                self._fresh = _Fresh(
                    self.catalog(schema),
                    self.state(schema),
                    {name: (pages, tuples, visible) for name, pages, tuples, visible in figures},
                )
        return schema

    # -- this process's connections --------------------------------------------------------
    def _own_connections(self) -> frozenset[int]:
        """This process's open TCP connections to the test server's port (socket inodes),
        but the pool's own."""
        own = set()
        mine = None if self._conn is None or self._conn.closed else self._conn.fileno()
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd == mine:
                continue
            try:
                if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                    continue
                with socket.socket(fileno=os.dup(fd)) as sock:
                    if sock.family not in (socket.AF_INET, socket.AF_INET6):
                        continue
                    if sock.type != socket.SOCK_STREAM:
                        continue
                    port = sock.getpeername()[1]
                    inode = os.fstat(sock.fileno()).st_ino
            except OSError:  # closed meanwhile, or not connected
                continue
            if port == self._port:
                own.add(inode)
        return frozenset(own)

    # -- the server ------------------------------------------------------------------------
    def _params(self, schema: str) -> dict[str, Any]:
        return {"schema": schema, "locks": list(ADVISORY_LOCKS), "kept": list(KEPT_TABLES)}

    def _lines(self, query: str, schema: str) -> list[str]:
        rows = self._admin(lambda c: c.execute(query, self._params(schema)).fetchall())
        return sorted(f"{kind}: {line}".replace(schema, "<schema>") for kind, line in rows)

    def _admin(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on the pool's own connection, connecting again if it was lost (a test
        may end sessions of the server)."""
        for attempt in (1, 2):
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.url, autocommit=True)
            try:
                return work(self._conn)
            except psycopg.OperationalError:
                if attempt == 2 or not self._conn.closed:
                    raise
        raise AssertionError("unreachable")


def drop_schema(url: str, schema: str) -> None:
    """Drop a test's schema. A process the test killed may still have a server backend finishing
    its last statement in it, which can deadlock with the drop: that is tried again."""
    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
    for attempt in range(5):
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(drop)
            return
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
            if attempt == 4:
                raise
            time.sleep(0.5)


def _processes_on(schema: str, since_ticks: float, last_pid: int) -> list[int]:
    """Processes started since ``since_ticks`` (after ``last_pid`` was handed out) that
    descend from this one or name ``schema`` in their command line or environment."""
    me, now_pid = os.getpid(), _last_pid()
    wrapped = now_pid < last_pid  # pids went round: any of them may be new
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        if not wrapped and pid <= last_pid:
            continue
        stat = _stat(pid)
        if stat is None or stat[2] < since_ticks - 1 or stat[0] == "Z":
            continue
        if _descends_from(pid, me) or _names(pid, schema):
            found.append(pid)
    return found


def _stat(pid: int) -> tuple[str, int, int] | None:
    """A process's state, parent, and start time (clock ticks since boot); None once gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[19])


def _descends_from(pid: int, ancestor: int) -> bool:
    seen = set()
    while pid not in (0, 1) and pid not in seen:
        seen.add(pid)
        stat = _stat(pid)
        if stat is None:
            return False
        pid = stat[1]
        if pid == ancestor:
            return True
    return False


def _names(pid: int, schema: str) -> bool:
    for part in ("cmdline", "environ"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/{part}", "rb") as text:
            if schema.encode() in text.read():
                return True
    return False


def _last_pid() -> int:
    """The process id handed out last on this machine."""
    with open("/proc/loadavg") as loadavg:
        return int(loadavg.read().split()[-1])


def _boot_ticks() -> float:
    """Now, in the unit of a process's start time in ``/proc/<pid>/stat``."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")


async def _migrate(url: str, schema: str) -> None:
    """Create and migrate ``schema`` with the store's own code, as a store's start does."""
    from duetime.store.postgres.store import PostgresStore

    store = PostgresStore(f"{url}{'&' if '?' in url else '?'}schema={schema}", listen=False)
    await store.open()
    await store.close()


def _in_new_loop(make: Callable[[], Any]) -> None:
    """Run a coroutine to the end on an event loop of its own (in a thread of its own when
    this one already runs a loop: the fixture of an ``async def`` test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(make())
        return
    with ThreadPoolExecutor(1) as thread:
        thread.submit(lambda: asyncio.run(make())).result()


def _tcp_port(url: str) -> int | None:
    """The server's TCP port in ``url`` (None when it is reached some other way)."""
    params: Mapping[str, Any] = conninfo_to_dict(url)
    host = str(params.get("host") or params.get("hostaddr") or "")
    if not host or host.startswith("/") or "," in host:
        return None
    return int(params.get("port") or 5432)
