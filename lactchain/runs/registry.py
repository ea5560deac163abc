"""The run registry: one SQLite file (WAL mode) shared by every job, the CLI and the TUI.

MLflow-shaped: ``runs`` with write-once ``params``, overwritable ``tags``, full
``metrics`` history plus ``latest_metrics``, and ``artifacts`` (paths of files
that live under ``<runs_dir>/<run_id>/``). LactChain adds ``episodes``,
``steps``, preference ``pairs`` and versioned strategy ``prompts``.

Concurrency model (why it looks like this):

* Several writer *processes* (detached jobs) and many readers (the TUI) share the
  file. WAL mode lets readers run while one writer writes; every write is one
  short ``BEGIN IMMEDIATE`` transaction, which takes the write lock up front so
  two writers queue on the busy timeout (30 s) instead of failing with
  ``SQLITE_BUSY`` when a read lock cannot be upgraded. Read-modify-write steps
  (next metric step, next prompt version, write-once params) happen inside that
  transaction, so concurrent writers never produce duplicates or lose rows.
* Inside one process, a ``Registry`` owns ONE connection opened with
  ``check_same_thread=False`` and guards every use of it with an ``RLock``.
  A sqlite3 connection has a single transaction state, so two threads
  interleaving statements on it would leak into each other's transactions; the
  lock keeps each transaction whole. Transactions are milliseconds long, so
  serialising the threads of one process costs nothing noticeable, and it is
  simpler (and closes deterministically) compared with a connection per thread.
* After ``fork`` the child opens its own connection (SQLite connections must not
  cross a fork); the parent's is left alone.
* ``synchronous=NORMAL``: in WAL mode this never corrupts the file; a power cut
  may drop the last few commits, a crashed process loses nothing committed.

The tables, the values they accept and the migrations live in
`lactchain.runs.schema`; this module owns the connection, the transactions and the
queries.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from lactchain.paths import default_db_path
from lactchain.runs.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SYSTEM_TAG_PREFIX,
    SYSTEM_TAGS,
    TABLES,
    TERMINAL_STATUSES,
    check_pair,
    check_run_status,
    decode_row,
    dumps,
    encode_row,
    loads,
    number,
    sql_value,
)
from lactchain.runs.sqlite_lib import NotFoundError, sqlite_utils

__all__ = [
    "AmbiguousRunId",
    "Registry",
    "RunNotFound",
    "looks_like_run_id",
    "now_ms",
]

# How long a writer waits for another's write lock ($LACTCHAIN_BUSY_TIMEOUT_S for tests and slow disks).
BUSY_TIMEOUT_S = float(os.environ.get("LACTCHAIN_BUSY_TIMEOUT_S", "30"))
_KIND_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*-[0-9a-f]{8}$")  # how create_run names runs: <kind>-<8 hex>


def looks_like_run_id(spec: str) -> bool:
    """A registry run id ("critic-1a2b3c4d") rather than a model preset or a folder."""
    return bool(_RUN_ID_RE.match(spec))


def now_ms() -> int:
    """Wall-clock time in integer milliseconds (the unit of every *_ms column)."""
    return int(time.time() * 1000)


class RunNotFound(KeyError):
    """No run has this id (or id prefix)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return self.message


class RegistryFileError(ValueError):
    """The file at the registry path cannot be used as a LactChain registry."""


def _inodes(path: Path) -> tuple[int | None, int | None]:
    """(inode of the registry file, inode of its -wal), None for a missing file."""
    def inode(p: Path) -> int | None:
        try:
            return os.stat(p).st_ino
        except OSError:
            return None
    return inode(path), inode(path.with_name(path.name + "-wal"))


def _write_refused(exc: sqlite3.OperationalError) -> bool:
    """SQLite's ways of saying it cannot write here (read-only file or media, full disk)."""
    text = str(exc).lower()
    return any(w in text for w in ("readonly", "read-only", "disk is full", "disk i/o", "unable to open"))


class WriteRefused(RegistryFileError):
    """A write to a registry opened read-only (every write passes `Registry._write`)."""


class AmbiguousRunId(RunNotFound):
    """An id prefix matches more than one run."""


def _as_list(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return list(value)


def _where(clauses: list[tuple[str, list[str] | None]]) -> tuple[str, list[Any]]:
    """Build `WHERE a IN (?, ?) AND b = ?` from (column, values-or-None) pairs."""
    parts: list[str] = []
    args: list[Any] = []
    for column, values in clauses:
        if values is None:
            continue
        parts.append(f"{column} IN ({', '.join('?' * len(values))})" if values else "0")
        args.extend(values)
    return (" WHERE " + " AND ".join(parts)) if parts else "", args


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

class Registry:
    """Read and write the run registry at `path` (default: ``lactchain.paths.default_db_path()``).

    Safe to share between the threads of one process and to open from many
    processes at once. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, readonly: bool = False):
        """`readonly`: open without ever writing (no WAL switch, no migration, no
        lock files where SQLite can avoid them); every write raises RegistryFileError.
        For browsing a registry on read-only media or a full disk (`open_for_reading`)."""
        self.path = Path(path).expanduser().absolute() if path is not None else default_db_path()
        self.readonly = bool(readonly)
        if self.path.is_dir():
            raise RegistryFileError(f"{self.path} is a directory, not a registry file: point --db at a file "
                                    f"such as {self.path / 'registry.db'}")
        if not self.readonly:
            blocking = next((p for p in [self.path.parent, *self.path.parent.parents] if p.exists()), None)
            if blocking is not None and not blocking.is_dir():
                raise RegistryFileError(f"{blocking} is a file, so the registry's folder {self.path.parent} cannot "
                                        "be made there: move that file away, or point --db (or $LACTCHAIN_DB) "
                                        "elsewhere")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.is_file():
            raise RegistryFileError(f"no registry at {self.path}")
        self._lock = threading.RLock()
        self._db: sqlite_utils.Database | None = None
        self._pid = -1
        self._files: tuple[int | None, int | None] = (None, None)  # inodes as opened: see restore_deleted_files
        self.upgraded_from: int | None = None  # the schema version this open migrated the file from
        self._database()  # open + migrate now, so a bad file fails at construction

    # -- connection ---------------------------------------------------------

    def _database(self) -> sqlite_utils.Database:
        """The connection of this process (re-opened in a forked child)."""
        if self._db is None or self._pid != os.getpid():
            if self.readonly:
                self._db, self._pid = self._open_readonly(), os.getpid()
                return self._db
            conn = sqlite3.connect(
                str(self.path),
                timeout=BUSY_TIMEOUT_S,
                check_same_thread=False,  # shared by threads; guarded by self._lock
                isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            )
            db = sqlite_utils.Database(conn, execute_plugins=False)
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            try:
                self._check_is_registry(db)  # before anything writes (WAL, schema) to the file
            except BaseException:
                conn.close()
                raise
            db.enable_wal()
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            self._db, self._pid = db, os.getpid()
            self._migrate(db)
            self._files = _inodes(self.path)
        return self._db

    @property
    def opened_inode(self) -> int | None:
        """The inode of the registry file this process's connection opened."""
        return self._files[0] if self._db is not None else None

    def restore_deleted_files(self) -> str | None:
        """Put back what a job's connection still holds when somebody deleted the registry
        file or its -wal under it (both stay readable through the open connection until it
        closes); a sentence for the job's log, or None when the files are as opened.

        -wal deleted: checkpoint it (still open) into registry.db, then reopen on a fresh
        one. registry.db deleted: SQLite's backup of the open database into a new file,
        moved into place in one rename. A file *replaced* by another is left alone (the
        caller warns): it may be somebody's registry."""
        with self._lock:
            if self.readonly or self._db is None or self._pid != os.getpid():
                return None
            (db_opened, wal_opened), (db_now, wal_now) = self._files, _inodes(self.path)
            if db_now is not None and db_now != db_opened:
                return None
            if db_now is not None and (wal_opened is None or wal_now == wal_opened):
                if wal_opened is None and wal_now is not None:
                    self._files = (db_opened, wal_now)  # the -wal appeared after the open
                return None
            conn = self._db.conn
            if db_now is None:
                staging = self.path.with_name(self.path.name + ".restoring")
                staging.unlink(missing_ok=True)
                with closing(sqlite3.connect(str(staging))) as target:
                    conn.backup(target)
                conn.close()
                os.replace(staging, self.path)
                what = f"the registry {self.path} was deleted; restored it from the job's open connection"
            else:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.close()
                what = (f"{self.path.name}-wal was deleted; what it held was checkpointed into {self.path.name} "
                        "and the registry reopened")
            self._db = None
            self._database()
            return what

    def _open_readonly(self) -> sqlite_utils.Database:
        """mode=ro first (sees a live writer's WAL); `immutable` when even that needs a
        write (read-only media with no -shm file): then nothing is locked or created."""
        from urllib.parse import quote

        last: Exception | None = None
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(f"file:{quote(str(self.path))}?{flags}", uri=True, timeout=BUSY_TIMEOUT_S,
                                   check_same_thread=False, isolation_level=None)
            try:
                db = sqlite_utils.Database(conn, execute_plugins=False)
                self._check_is_registry(db)
                version = self._user_version(db)
                if version != SCHEMA_VERSION:
                    raise RegistryFileError(f"{self.path} has schema version {version} and this lactchain reads "
                                            f"{SCHEMA_VERSION}; open it once with write access to upgrade it")
                return db
            except sqlite3.OperationalError as exc:
                conn.close()
                last = exc
            except BaseException:
                conn.close()
                raise
        raise sqlite3.OperationalError(f"cannot open {self.path} read-only: {last}")

    def _check_is_registry(self, db: sqlite_utils.Database) -> None:
        """Refuse, untouched, a SQLite file of another application or from a newer lactchain."""
        # One statement, one snapshot: read apart, a process that creates the schema between
        # the two reads would make a fresh registry look like another application's file.
        version, names = db.execute(
            "SELECT (SELECT user_version FROM pragma_user_version), "
            "(SELECT group_concat(name, char(31)) FROM sqlite_master WHERE type = 'table')").fetchone()
        version = int(version or 0)
        if version > SCHEMA_VERSION:
            raise RegistryFileError(
                f"{self.path} has schema version {version}, newer than this lactchain "
                f"({SCHEMA_VERSION}); upgrade lactchain to open it"
            )
        if version == 0:
            tables = names.split(chr(31)) if names else []
            if tables:
                shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
                raise RegistryFileError(
                    f"{self.path} is a SQLite database of another application (tables: {shown}), not a "
                    "LactChain registry; point --db at a registry or at a new file"
                )

    def _migrate(self, db: sqlite_utils.Database) -> None:
        """Bring the schema to SCHEMA_VERSION; concurrent openers serialise on the write lock."""
        if self._user_version(db) == SCHEMA_VERSION:
            return  # the common case takes no write lock, so readers never wait here
        with self._write() as db:
            current = self._user_version(db)  # re-read: another process may have migrated
            if current > SCHEMA_VERSION:
                raise RegistryFileError(
                    f"{self.path} has schema version {current}, newer than this lactchain "
                    f"({SCHEMA_VERSION}); upgrade lactchain to open it"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[version](db)
                db.execute(f"PRAGMA user_version = {version}")
            if 0 < current < SCHEMA_VERSION:  # an existing registry this open upgraded (not one a racing
                self.upgraded_from = current  # opener upgraded while this one waited for the lock)

    @property
    def upgrade_note(self) -> str | None:
        """One line when this open upgraded the file's schema: an older lactchain (another
        machine's, a job still running old code) refuses it from now on."""
        if self.upgraded_from is None:
            return None
        return (f"note: upgraded the registry {self.path} from schema {self.upgraded_from} to {SCHEMA_VERSION}; "
                "a lactchain older than this one can no longer open it (upgrade it where it runs)")

    @staticmethod
    def _user_version(db: sqlite_utils.Database) -> int:
        return db.execute("PRAGMA user_version").fetchone()[0]

    @property
    def schema_version(self) -> int:
        with self._lock:
            return self._user_version(self._database())

    @contextmanager
    def _write(self) -> Iterator[sqlite_utils.Database]:
        """One short write transaction that holds the write lock from its first statement."""
        with self._lock:
            if self.readonly:
                raise WriteRefused(f"{self.path} is open read-only (read-only media or a full disk); "
                                        "nothing can be written to it now")
            db = self._database()
            if db.conn.in_transaction:  # nested call from another write method
                with db.atomic():  # a savepoint
                    yield db
                return
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.conn.execute("ROLLBACK")
                raise
            db.conn.execute("COMMIT")

    def _rows(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._database().query(sql, args))

    def _value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._lock:
            row = self._database().execute(sql, args).fetchone()
        return row[0] if row else None

    @contextmanager
    def transaction(self) -> Iterator["Registry"]:
        """Group several writes into one transaction: all of them land or none (a crash
        or a full disk never leaves an episode claiming steps that were not stored)."""
        with self._write():
            yield self

    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Registry({str(self.path)!r}{', readonly=True' if self.readonly else ''})"

    @classmethod
    def open_for_reading(cls, path: str | os.PathLike[str] | None = None) -> "Registry":
        """A registry to read from: writable when it can be (so dead runs get marked),
        read-only when the file, its folder or the disk refuse writes."""
        try:
            return cls(path)
        except (sqlite3.OperationalError, PermissionError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not _write_refused(exc):
                raise
            return cls(path, readonly=True)

    # -- folders ------------------------------------------------------------

    @property
    def runs_dir(self) -> Path:
        """Folder holding the run folders: the directory of the db file."""
        return self.path.parent

    def run_dir(self, run_id: str) -> Path:
        """``<runs_dir>/<run_id>/`` (created unless read-only): logs, checkpoints, datasets of one run."""
        folder = self.runs_dir / run_id
        if not self.readonly:
            folder.mkdir(parents=True, exist_ok=True)
        return folder

    # -- runs ---------------------------------------------------------------

    def create_run(
        self,
        kind: str,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        parent_id: str | None = None,
        cmd: Sequence[str] | None = None,
        status: str = "SCHEDULED",
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Register a run and return its id ``<kind>-<8 hex>`` (also its folder name)."""
        if not _KIND_RE.match(kind or ""):
            raise ValueError(f"run kind {kind!r} must be letters, digits, '_', '-' or '.'")
        check_run_status(status)
        created = now_ms()
        with self._write() as db:
            if parent_id is not None:
                self._require_run(db, parent_id)
            while True:
                run_id = f"{kind}-{uuid.uuid4().hex[:8]}"
                if db.execute("SELECT 1 FROM runs WHERE id = ?", [run_id]).fetchone() is None:
                    break
            row = encode_row("runs", {"name": name, "kind": kind, "status": status, "parent_id": parent_id,
                                   "cmd": list(cmd) if cmd is not None else None, "created_ms": created},
                          what="create_run")
            if status == "RUNNING":
                row.update(started_ms=created, heartbeat_ms=created)
            db.table("runs").insert({"id": run_id, **row})
            if params:
                self.log_params(run_id, params)
            for key, value in (tags or {}).items():
                self.set_tag(run_id, key, value)
        return run_id

    def start_run(self, run_id: str, pid: int | None = None, pgid: int | None = None) -> None:
        """Mark RUNNING now (pid/pgid recorded when given; None leaves what is stored)."""
        t = now_ms()
        fields: dict[str, Any] = {"status": "RUNNING", "started_ms": t, "heartbeat_ms": t}
        if pid is not None:
            fields["pid"] = pid
        if pgid is not None:
            fields["pgid"] = pgid
        self.update_run(run_id, **fields)

    def end_run(self, run_id: str, status: str, exit_code: int | None = None, error: str | None = None) -> None:
        """Mark a terminal status (FINISHED, FAILED or KILLED) with its end time."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"end_run status must be one of {', '.join(TERMINAL_STATUSES)}, not {status!r}")
        fields: dict[str, Any] = {"status": status, "ended_ms": now_ms()}
        if exit_code is not None:
            fields["exit_code"] = exit_code
        if error is not None:
            fields["error"] = error
        self.update_run(run_id, **fields)

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Set any run columns except ``id`` (e.g. ``log_path``, ``pid``, ``status``)."""
        if "status" in fields:
            check_run_status(fields["status"])
        row = encode_row("runs", fields, what="update_run")
        if not row:
            return
        with self._write() as db:
            try:
                db.table("runs").update(run_id, row)
            except NotFoundError:
                raise RunNotFound(f"no run with id {run_id!r} in {self.path}") from None

    def heartbeat(self, run_id: str) -> None:
        """Record that the job of this run is alive (a stale heartbeat + dead pid = FAILED)."""
        self.update_run(run_id, heartbeat_ms=now_ms())

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The run with this id, or with this unique id prefix (as typed in the CLI)."""
        rows = self._rows("SELECT * FROM runs WHERE id = ?", [run_id])
        if not rows and run_id:
            rows = self._rows(
                "SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY created_ms DESC LIMIT 6",
                [len(run_id), run_id],
            )
        if not rows:
            raise RunNotFound(f"no run with id {run_id!r} in {self.path} (try `lactchain runs list`)")
        if len(rows) > 1:
            shown = ", ".join(r["id"] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise AmbiguousRunId(f"run id prefix {run_id!r} matches several runs: {shown}")
        return decode_row("runs", rows[0])

    def resolve_run_id(self, run_id: str) -> str:
        """Full id for an id or unique prefix (raises RunNotFound)."""
        return self.get_run(run_id)["id"]

    def list_runs(
        self,
        kind: str | Iterable[str] | None = None,
        status: str | Iterable[str] | None = None,
        parent_id: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Runs, newest first; `kind` and `status` take one value or several."""
        where, args = _where([("kind", _as_list(kind)), ("status", _as_list(status)),
                              ("parent_id", _as_list(parent_id))])
        sql = f"SELECT * FROM runs{where} ORDER BY created_ms DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        return [decode_row("runs", r) for r in self._rows(sql, args)]

    def kinds(self) -> list[str]:
        """The kinds of run this registry holds, sorted."""
        return [r["kind"] for r in self._rows("SELECT DISTINCT kind FROM runs ORDER BY kind")]

    _SEARCH_TEXT = ("id", "name", "kind", "status", "error")
    _SEARCH_FIELDS = ("id", "name", "kind", "status", "parent_id", "error")

    def search_runs(self, terms: Sequence[str] = (), fields: Mapping[str, str] | None = None,
                    limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Runs, newest first, whose id, name, kind, status, error or user tags (a note)
        contain every one of `terms`, and whose `fields` (column -> text) contain that text; case-insensitive.
        Returns (up to `limit` runs, how many match in all), so a browser can say the
        true count and reach any run by filtering, however many there are."""
        clauses, args = [], []
        system = ", ".join("?" * len(SYSTEM_TAGS))
        for term in terms:  # in the run's own text or in one of its user's tags (a note)
            hay = " || ' ' || ".join(f"lower(coalesce({c}, ''))" for c in self._SEARCH_TEXT)
            clauses.append(f"(instr({hay}, ?) > 0 OR EXISTS (SELECT 1 FROM tags t WHERE t.run_id = runs.id "
                           f"AND t.key NOT IN ({system}) AND substr(t.key, 1, ?) != ? "
                           "AND instr(lower(t.value), ?) > 0))")
            args += [term.lower(), *SYSTEM_TAGS, len(SYSTEM_TAG_PREFIX), SYSTEM_TAG_PREFIX, term.lower()]
        for column, text in (fields or {}).items():
            if column not in self._SEARCH_FIELDS:
                raise ValueError(f"cannot filter runs by {column!r}; use one of {', '.join(self._SEARCH_FIELDS)}")
            clauses.append(f"instr(lower(coalesce({column}, '')), ?) > 0")
            args.append(str(text).lower())
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        total = self._value(f"SELECT count(*) FROM runs{where}", args)
        sql = f"SELECT * FROM runs{where} ORDER BY created_ms DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [decode_row("runs", r) for r in self._rows(sql, args)], int(total)

    def delete_run(self, run_id: str) -> None:
        """Delete a run and all its rows (not its folder); child runs keep living, unparented."""
        with self._write() as db:
            self._require_run(db, run_id)
            db.execute("DELETE FROM runs WHERE id = ?", [run_id])

    def descendants(self, run_ids: Iterable[str]) -> list[dict[str, Any]]:
        """Every run below `run_ids` (their children, theirs, ...), breadth first, each once
        (a pipeline's phases, a benchmark's cells, the runs resumed from them)."""
        seen, out = set(run_ids), []
        frontier = list(seen)
        while frontier:
            for child in self.list_runs(parent_id=frontier.pop(0)):
                if child["id"] not in seen:
                    seen.add(child["id"])
                    out.append(child)
                    frontier.append(child["id"])
        return out

    def runs_naming(self, text: str) -> list[str]:
        """Ids of the runs whose params or artifact paths contain `text` -- given a run id,
        the runs that read that run (its critic, adapter, pairs, archive, checkpoint)."""
        rows = self._rows("SELECT run_id FROM params WHERE instr(value, ?) > 0 "
                          "UNION SELECT run_id FROM artifacts WHERE instr(path, ?) > 0", [text, text])
        return sorted(r["run_id"] for r in rows)

    def _require_run(self, db: sqlite_utils.Database, run_id: str) -> None:
        if db.execute("SELECT 1 FROM runs WHERE id = ?", [run_id]).fetchone() is None:
            raise RunNotFound(f"no run with id {run_id!r} in {self.path}")

    # -- params and tags ----------------------------------------------------

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Record hyper-parameters. Write-once: the same value again is fine, a new one is a ValueError.

        Values are stored as JSON, so ``params()`` gives back numbers, lists and dicts.
        """
        with self._write() as db:
            self._require_run(db, run_id)
            existing = {r[0]: r[1] for r in db.execute("SELECT key, value FROM params WHERE run_id = ?", [run_id])}
            new_rows = []
            for key, value in params.items():
                encoded = dumps(value)
                if key in existing:
                    old = loads(existing[key])
                    if old != json.loads(encoded):
                        raise ValueError(
                            f"param {key!r} of run {run_id} is already {old!r}; params are write-once "
                            f"(refusing {json.loads(encoded)!r}) - use a tag or a new run"
                        )
                    continue
                new_rows.append({"run_id": run_id, "key": str(key), "value": encoded})
            if new_rows:
                db.table("params").insert_all(new_rows)

    def params(self, run_id: str) -> dict[str, Any]:
        rows = self._rows("SELECT key, value FROM params WHERE run_id = ? ORDER BY key", [run_id])
        return {r["key"]: loads(r["value"]) for r in rows}

    def param_values(self, key: str, kind: str | None = None, status: str | None = None) -> list[tuple[str, Any]]:
        """(run id, value) of one param across the runs of `kind` (and `status`) that set it,
        newest run first: one query, for a list that would otherwise read each run's params."""
        sql = "SELECT p.run_id, p.value FROM params p JOIN runs r ON r.id = p.run_id WHERE p.key = ?"
        args: list[Any] = [key]
        for column, value in (("kind", kind), ("status", status)):
            if value is not None:
                sql += f" AND r.{column} = ?"
                args.append(value)
        rows = self._rows(sql + " ORDER BY r.created_ms DESC, r.rowid DESC", args)
        return [(r["run_id"], loads(r["value"])) for r in rows]

    def set_tag(self, run_id: str, key: str, value: Any) -> None:
        """Set (or overwrite) a string tag; None deletes it."""
        with self._write() as db:
            self._require_run(db, run_id)
            if value is None:
                db.execute("DELETE FROM tags WHERE run_id = ? AND key = ?", [run_id, key])
            else:
                db.table("tags").upsert({"run_id": run_id, "key": str(key), "value": str(value)},
                                        pk=("run_id", "key"))

    def tags(self, run_id: str) -> dict[str, str]:
        rows = self._rows("SELECT key, value FROM tags WHERE run_id = ? ORDER BY key", [run_id])
        return {r["key"]: r["value"] for r in rows}

    # -- metrics ------------------------------------------------------------

    def log_metric(self, run_id: str, key: str, value: float, step: int | None = None) -> int:
        """Append one value; `step` None means one past the last step logged for this key. Returns the step."""
        return self.log_metrics(run_id, {key: value}, step=step)[key]

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int | None = None) -> dict[str, int]:
        """Append several values in one transaction; returns the step used for each key.

        With `step` None each key gets its own next step (keys logged together stay aligned).
        NaN is stored as NULL and reads back as None.
        """
        ts = now_ms()
        used: dict[str, int] = {}
        with self._write() as db:
            self._require_run(db, run_id)
            for key, value in metrics.items():
                if step is None:
                    last = db.execute("SELECT max(step) FROM metrics WHERE run_id = ? AND key = ?",
                                      [run_id, key]).fetchone()[0]
                    key_step = 0 if last is None else last + 1
                else:
                    key_step = int(step)
                v = sql_value(value)
                v = float(v) if v is not None else None
                db.execute("INSERT INTO metrics (run_id, key, step, value, ts_ms) VALUES (?, ?, ?, ?, ?)",
                           [run_id, key, key_step, v, ts])
                # latest = highest step (ties: most recent); a late, lower step does not win
                db.execute(
                    "INSERT INTO latest_metrics (run_id, key, step, value, ts_ms) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (run_id, key) DO UPDATE SET step = excluded.step, value = excluded.value, "
                    "ts_ms = excluded.ts_ms WHERE excluded.step >= latest_metrics.step",
                    [run_id, key, key_step, v, ts],
                )
                used[key] = key_step
        return used

    def metric_history(self, run_id: str, key: str) -> list[dict[str, Any]]:
        """Every logged value of one metric, by step: ``[{step, value, ts_ms}, ...]``."""
        return [decode_row("metrics", r) for r in self._rows(
            "SELECT step, value, ts_ms FROM metrics WHERE run_id = ? AND key = ? ORDER BY step, id",
            [run_id, key],
        )]

    def latest_metrics(self, run_id: str) -> dict[str, float | None]:
        rows = self._rows("SELECT key, value FROM latest_metrics WHERE run_id = ? ORDER BY key", [run_id])
        return {r["key"]: number(r["value"]) for r in rows}

    def metric_counts(self, run_id: str) -> dict[str, int]:
        """How many values each metric of a run has (a chart wants the ones with a curve)."""
        rows = self._rows("SELECT key, count(*) AS n FROM metrics WHERE run_id = ? GROUP BY key", [run_id])
        return {r["key"]: int(r["n"]) for r in rows}

    def metric_keys(self, run_id: str) -> list[str]:
        return [r["key"] for r in self._rows(
            "SELECT key FROM latest_metrics WHERE run_id = ? ORDER BY key", [run_id])]

    # -- artifacts ----------------------------------------------------------

    def add_artifact(self, run_id: str, kind: str, path: str | os.PathLike[str], step: int | None = None,
                     meta: Mapping[str, Any] | None = None) -> int:
        """Record a file or folder (checkpoint, adapter, dataset, critic, ...) of a run; returns its id."""
        row = encode_row("artifacts", {"run_id": run_id, "kind": kind, "path": os.fspath(path), "step": step,
                                    "meta": meta, "created_ms": now_ms()}, what="add_artifact")
        with self._write() as db:
            self._require_run(db, run_id)
            return db.table("artifacts").insert(row).last_pk

    def artifacts(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """Artifacts in the order they were added."""
        where, args = _where([("run_id", [run_id]), ("kind", _as_list(kind))])
        return [decode_row("artifacts", r) for r in self._rows(f"SELECT * FROM artifacts{where} ORDER BY id", args)]

    def latest_artifact(self, run_id: str, kind: str) -> dict[str, Any] | None:
        """The most recently added artifact of this kind (what `resume` loads), or None."""
        rows = self._rows("SELECT * FROM artifacts WHERE run_id = ? AND kind = ? ORDER BY id DESC LIMIT 1",
                          [run_id, kind])
        return decode_row("artifacts", rows[0]) if rows else None

    def delete_artifacts(self, run_id: str, kind: str) -> int:
        """Delete the rows of a run's `kind` artifacts (their files are the caller's); how many went."""
        with self._write() as db:
            return db.execute("DELETE FROM artifacts WHERE run_id = ? AND kind = ?", [run_id, kind]).rowcount

    def prune_artifacts(self, run_id: str, kind: str) -> int:
        """Delete the rows of `kind` artifacts whose files are gone (a trainer rotated its
        old checkpoints away), so no row points at nothing. Returns how many went."""
        gone = [a["id"] for a in self.artifacts(run_id, kind) if not Path(a["path"]).exists()]
        if gone:
            with self._write() as db:
                db.execute(f"DELETE FROM artifacts WHERE id IN ({', '.join('?' * len(gone))})", gone)
        return len(gone)

    # -- episodes and steps -------------------------------------------------

    def add_episode(self, run_id: str, **fields: Any) -> int:
        """Insert an episode (``return`` may be passed as ``return_``); returns its id."""
        row = encode_row("episodes", {"created_ms": now_ms(), **fields}, what="add_episode")
        with self._write() as db:
            self._require_run(db, run_id)
            return db.table("episodes").insert({"run_id": run_id, **row}).last_pk

    def update_episode(self, episode_id: int, **fields: Any) -> None:
        """Fill in what is known at the end (return, length, success, ...)."""
        row = encode_row("episodes", fields, what="update_episode")
        if not row:
            return
        with self._write() as db:
            try:
                db.table("episodes").update(episode_id, row)
            except NotFoundError:
                raise KeyError(f"no episode with id {episode_id}") from None

    def add_steps(self, run_id: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Insert many steps in one transaction (a batched rollout writes a step of N envs at once)."""
        created = now_ms()
        encoded = [{"run_id": run_id, **encode_row("steps", {"created_ms": created, **r}, what="add_steps")}
                   for r in rows]
        if not encoded:
            return
        with self._write() as db:
            self._require_run(db, run_id)
            db.table("steps").insert_all(encoded)

    def episodes(self, run_id: str) -> list[dict[str, Any]]:
        return [decode_row("episodes", r) for r in self._rows(
            "SELECT * FROM episodes WHERE run_id = ? ORDER BY idx, id", [run_id])]

    def steps(self, run_id: str | None = None, episode_id: int | None = None) -> list[dict[str, Any]]:
        """Steps of a run and/or an episode, in time order."""
        where, args = _where([("run_id", _as_list(run_id)),
                              ("episode_id", None if episode_id is None else [episode_id])])
        return [decode_row("steps", r) for r in self._rows(
            f"SELECT * FROM steps{where} ORDER BY episode_id, t, id", args)]

    # -- preference pairs ---------------------------------------------------

    def add_pairs(self, run_id: str, rows: Iterable[Mapping[str, Any]]) -> list[int]:
        """Insert pairs in one transaction; returns their ids.

        Defaults: ``margin`` = chosen_score - rejected_score when both are given;
        ``status`` = "labeled" when a non-human labeler is given, else "pending"
        (human pairs wait for the TUI).
        """
        t = now_ms()
        encoded = []
        for r in rows:
            r = dict(r)
            if r.get("margin") is None and r.get("chosen_score") is not None and r.get("rejected_score") is not None:
                r["margin"] = float(sql_value(r["chosen_score"])) - float(sql_value(r["rejected_score"]))
            if r.get("status") is None:
                r["status"] = "labeled" if r.get("labeler") not in (None, "human") else "pending"
            check_pair(r)
            encoded.append({"run_id": run_id, **encode_row("pairs", {"created_ms": t, "updated_ms": t, **r},
                                                         what="add_pairs")})
        ids: list[int] = []
        with self._write() as db:
            self._require_run(db, run_id)
            for row in encoded:
                ids.append(db.table("pairs").insert(row).last_pk)
        return ids

    def pairs(
        self,
        run_ids: str | Iterable[str] | None = None,
        labeler: str | Iterable[str] | None = None,
        status: str | Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Pairs filtered by run(s), labeler(s) and status(es), oldest first."""
        where, args = _where([("run_id", _as_list(run_ids)), ("labeler", _as_list(labeler)),
                              ("status", _as_list(status))])
        return [decode_row("pairs", r) for r in self._rows(f"SELECT * FROM pairs{where} ORDER BY id", args)]

    def get_pair(self, pair_id: int) -> dict[str, Any]:
        rows = self._rows("SELECT * FROM pairs WHERE id = ?", [pair_id])
        if not rows:
            raise KeyError(f"no pair with id {pair_id}")
        return decode_row("pairs", rows[0])

    def update_pair(self, pair_id: int, **fields: Any) -> None:
        """Change a pair (a human label, a swap, a skip); sets ``updated_ms``."""
        check_pair(fields)
        row = encode_row("pairs", {**fields, "updated_ms": now_ms()}, what="update_pair")
        with self._write() as db:
            try:
                db.table("pairs").update(pair_id, row)
            except NotFoundError:
                raise KeyError(f"no pair with id {pair_id}") from None

    # -- strategy prompts ---------------------------------------------------

    def save_prompt(self, text: str, template: str | None = None, name: str | None = None,
                    note: str | None = None, parent_version: int | None = None, score: float | None = None,
                    run_id: str | None = None, env: str | None = None) -> int:
        """Store a new strategy-prompt version (always a new one, even for identical text);
        `score` and `run_id`: what a strategy search measured it at, and the search's run;
        `env`: the env it was written for."""
        if score is not None and not math.isfinite(float(score)):
            raise ValueError(f"a strategy's score must be a finite number, got {score!r}")
        with self._write() as db:
            last = db.execute("SELECT max(version) FROM prompts").fetchone()[0]
            version = 1 if last is None else last + 1
            db.table("prompts").insert({"version": version, "name": name, "text": text, "template": template,
                                  "note": note, "parent_version": parent_version, "created_ms": now_ms(),
                                  "score": None if score is None else float(score), "run_id": run_id,
                                  "env": env})
        return version

    def prompts(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM prompts ORDER BY version DESC")

    def get_prompt(self, version: int | None = None) -> dict[str, Any] | None:
        """One version, or the latest when `version` is None; None if there is none."""
        if version is None:
            rows = self._rows("SELECT * FROM prompts ORDER BY version DESC LIMIT 1")
        else:
            rows = self._rows("SELECT * FROM prompts WHERE version = ?", [version])
        return rows[0] if rows else None

    # -- overview -----------------------------------------------------------

    def counts(self, run_id: str | None = None) -> dict[str, int]:
        """Rows per table, overall or for one run (prompts are not per run)."""
        out: dict[str, int] = {}
        for table in TABLES:
            if run_id is None:
                out[table] = self._value(f"SELECT count(*) FROM {table}")
            elif table == "runs":
                out[table] = self._value("SELECT count(*) FROM runs WHERE id = ?", [run_id])
            elif table != "prompts":
                out[table] = self._value(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id])
        return out
