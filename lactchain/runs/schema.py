"""The registry's schema: its tables, the values they accept, and the migrations
that bring an older file up to date.

Kept apart from `Registry` (the connection, transactions and queries) so that what a
registry file holds reads in one place. The schema is versioned with ``PRAGMA
user_version``; ``MIGRATIONS`` maps each version to the step that brings the schema
from the previous version to it. CHECK constraints cannot be altered in SQLite: a new
run status, pair status or labeler needs a migration that rebuilds its table, or a file
made before it refuses the new value.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from lactchain.runs.sqlite_lib import sqlite_utils

RUN_STATUSES = ("SCHEDULED", "RUNNING", "FINISHED", "FAILED", "KILLED")
ACTIVE_STATUSES = ("SCHEDULED", "RUNNING")
TERMINAL_STATUSES = ("FINISHED", "FAILED", "KILLED")
LABELERS = ("critic", "rollout", "oracle", "human", "llm", "episodes")
PAIR_STATUSES = ("pending", "labeled", "skipped", "tie")
# Not enforced (new kinds need no migration); listed so callers share spellings.
RUN_KINDS = ("play", "critic", "pairs", "actor", "eval", "pipeline", "labels", "rollout", "collect", "judge", "reward", "agents",
             "baseline", "archive", "dt", "dt-eval", "bench", "strategy")
ARTIFACT_KINDS = ("checkpoint", "adapter", "dataset", "critic", "dt")
# Tags lactchain writes itself (engine.GENERATION_TAG / REPLICAS_TAG, runs.resume.RESUMES_TAG,
# a trainer's warning, machine.code_tags' code.*): a user's own tags (`runs tag`, the console's
# note) are every other key, and the runs filter searches theirs, not these.
SYSTEM_TAGS = ("generation", "replicas", "resumes", "warning")
SYSTEM_TAG_PREFIX = "code."
NOTE_TAG = "note"
MAX_TAG_KEY, MAX_TAG_VALUE = 64, 2000


def is_system_tag(key: str) -> bool:
    return key in SYSTEM_TAGS or key.startswith(SYSTEM_TAG_PREFIX)


def check_user_tag(key: str, value: str | None) -> None:
    """A tag a user may write (ValueError naming the problem): a short key of its own
    (not one lactchain writes) and a value of at most MAX_TAG_VALUE characters."""
    if not key or len(key) > MAX_TAG_KEY or not key.isprintable() or key != key.strip():
        shown = key if len(key) <= 60 else f"{key[:57]}... ({len(key)} characters)"
        raise ValueError(f"tag key {shown!r}: give 1-{MAX_TAG_KEY} printable characters without edge spaces")
    if is_system_tag(key):
        raise ValueError(f"tag {key!r} is written by lactchain itself ({', '.join(SYSTEM_TAGS)}, "
                         f"{SYSTEM_TAG_PREFIX}*); pick another key, e.g. {NOTE_TAG}")
    if value is not None and len(value) > MAX_TAG_VALUE:
        raise ValueError(f"tag {key!r}: {len(value)} characters; keep it to {MAX_TAG_VALUE}")


# ---------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------

def _in(values: Sequence[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


SCHEMA_V1 = [
    f"""
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        name TEXT,
        kind TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'SCHEDULED' CHECK (status IN ({_in(RUN_STATUSES)})),
        parent_id TEXT REFERENCES runs(id) ON DELETE SET NULL,
        created_ms INTEGER NOT NULL,
        started_ms INTEGER,
        ended_ms INTEGER,
        pid INTEGER,
        pgid INTEGER,
        cmd TEXT,
        log_path TEXT,
        exit_code INTEGER,
        error TEXT,
        heartbeat_ms INTEGER
    )""",
    "CREATE INDEX idx_runs_kind ON runs(kind)",
    "CREATE INDEX idx_runs_status ON runs(status)",
    "CREATE INDEX idx_runs_parent ON runs(parent_id)",
    "CREATE INDEX idx_runs_created ON runs(created_ms)",
    """
    CREATE TABLE params (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT,
        PRIMARY KEY (run_id, key)
    )""",
    """
    CREATE TABLE tags (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT,
        PRIMARY KEY (run_id, key)
    )""",
    """
    CREATE TABLE metrics (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        step INTEGER NOT NULL,
        value REAL,
        ts_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX idx_metrics_run_key_step ON metrics(run_id, key, step)",
    """
    CREATE TABLE latest_metrics (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        step INTEGER NOT NULL,
        value REAL,
        ts_ms INTEGER NOT NULL,
        PRIMARY KEY (run_id, key)
    )""",
    """
    CREATE TABLE artifacts (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        path TEXT NOT NULL,
        step INTEGER,
        meta TEXT,
        created_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX idx_artifacts_run_kind ON artifacts(run_id, kind)",
    """
    CREATE TABLE episodes (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx INTEGER,
        seed INTEGER,
        start_state TEXT,
        "return" REAL,
        length INTEGER,
        success INTEGER,
        moves_used INTEGER,
        optimal_moves INTEGER,
        parse_failures INTEGER,
        created_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX idx_episodes_run ON episodes(run_id, idx)",
    """
    CREATE TABLE steps (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        episode_id INTEGER REFERENCES episodes(id) ON DELETE CASCADE,
        t INTEGER,
        state TEXT,
        prompt TEXT,
        completion TEXT,
        moves TEXT,
        parse_mode TEXT,
        reward REAL,
        next_state TEXT,
        done INTEGER,  -- terminated or truncated: the episode ended here
        terminated INTEGER,  -- a true end (goal reached): no bootstrapping from next_state
        caption TEXT,
        seed INTEGER,
        logprob REAL,
        created_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX idx_steps_run ON steps(run_id)",
    "CREATE INDEX idx_steps_episode ON steps(episode_id)",
    f"""
    CREATE TABLE pairs (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        state TEXT,
        prompt TEXT,
        chosen TEXT,
        rejected TEXT,
        chosen_score REAL,
        rejected_score REAL,
        margin REAL,
        labeler TEXT CHECK (labeler IS NULL OR labeler IN ({_in(LABELERS)})),
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ({_in(PAIR_STATUSES)})),
        meta TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX idx_pairs_run ON pairs(run_id)",
    "CREATE INDEX idx_pairs_labeler_status ON pairs(labeler, status)",
    """
    CREATE TABLE prompts (
        id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL UNIQUE,
        name TEXT,
        text TEXT NOT NULL,
        template TEXT,
        note TEXT,
        parent_version INTEGER,
        created_ms INTEGER NOT NULL
    )""",
]


def _migrate_v1(db: sqlite_utils.Database) -> None:
    """Initial schema."""
    for statement in SCHEMA_V1:
        db.execute(statement)


def _migrate_v2(db: sqlite_utils.Database) -> None:
    """Strategy versions carry the score a strategy search gave them and the search's run."""
    db.execute("ALTER TABLE prompts ADD COLUMN score REAL")
    db.execute("ALTER TABLE prompts ADD COLUMN run_id TEXT")


def _migrate_v3(db: sqlite_utils.Database) -> None:
    """A strategy version names the env it was written for (a hand-saved one too), so the
    console lists each env's own; versions saved before say none (listed for every env)."""
    db.execute("ALTER TABLE prompts ADD COLUMN env TEXT")


# version -> step that brings the schema from version-1 to version. Append only:
# a later change adds the next (ALTER TABLE ..., new indexes, backfills).
MIGRATIONS: dict[int, Callable[[sqlite_utils.Database], None]] = {1: _migrate_v1, 2: _migrate_v2, 3: _migrate_v3}
SCHEMA_VERSION = max(MIGRATIONS)

TABLES = ("runs", "params", "tags", "metrics", "latest_metrics", "artifacts", "episodes", "steps", "pairs", "prompts")

# Columns callers may write, per table (anything else is a ValueError, not a
# late "no such column" from SQLite). JSON columns are encoded on write and
# decoded on read; BOOL columns come back as bool.
COLUMNS = {
    "runs": ("name", "kind", "status", "parent_id", "created_ms", "started_ms", "ended_ms", "pid", "pgid",
             "cmd", "log_path", "exit_code", "error", "heartbeat_ms"),
    "artifacts": ("run_id", "kind", "path", "step", "meta", "created_ms"),
    "episodes": ("idx", "seed", "start_state", "return", "length", "success", "moves_used", "optimal_moves",
                 "parse_failures", "created_ms"),
    "steps": ("episode_id", "t", "state", "prompt", "completion", "moves", "parse_mode", "reward", "next_state",
              "done", "terminated", "caption", "seed", "logprob", "created_ms"),
    "pairs": ("state", "prompt", "chosen", "rejected", "chosen_score", "rejected_score", "margin", "labeler",
              "status", "meta", "created_ms", "updated_ms"),
}
JSON_COLUMNS = {
    "runs": {"cmd"},
    "artifacts": {"meta"},
    "episodes": {"start_state"},
    "steps": {"state", "moves", "next_state"},
    "pairs": {"state", "chosen", "rejected", "meta"},
}
BOOL_COLUMNS = {"episodes": {"success"}, "steps": {"done", "terminated"}}


def _numeric_columns() -> dict[str, frozenset[str]]:
    """Each table's INTEGER and REAL columns, read from the schema (ids aside)."""
    out: dict[str, frozenset[str]] = {}
    for statement in SCHEMA_V1:
        created = re.search(r"CREATE TABLE (\w+)", statement)
        if created is None:  # an index
            continue
        table = created.group(1)
        found = re.finditer(r'^\s*"?(\w+)"? (?:INTEGER|REAL)\b', statement, flags=re.M)
        out[table] = frozenset(m.group(1) for m in found) - {"id"}
    out["prompts"] |= {"score"}  # added by _migrate_v2
    return out


# A value of another type in one of these (a registry edited by hand: SQLite keeps text that
# is no number as text) reads as missing, never as text a duration or a chart would divide.
NUMERIC_COLUMNS = _numeric_columns()

# `return` is a Python keyword: add_episode(return_=...) is accepted too.
ALIASES = {"return_": "return"}


# ---------------------------------------------------------------------------
# Value conversion
# ---------------------------------------------------------------------------

def json_default(obj: Any) -> Any:
    """Make states, numpy values and paths JSON-able (env states have ``as_dict``)."""
    if hasattr(obj, "as_dict"):
        return obj.as_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):  # numpy arrays / scalars, torch tensors
        return obj.tolist()
    return str(obj)


def dumps(value: Any) -> str:
    return json.dumps(value, default=json_default)


def loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # written by hand or by an older tool; show it as it is


def sql_value(value: Any) -> Any:
    """A value sqlite3 can bind: numpy/torch scalars -> python, Path -> str, NaN -> NULL."""
    if value is None or isinstance(value, (str, int, bytes)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):
        return sql_value(value.item())
    return value


def encode_row(table: str, fields: Mapping[str, Any], *, what: str) -> dict[str, Any]:
    """Validate column names and convert values for `table`."""
    allowed = COLUMNS[table]
    json_cols = JSON_COLUMNS.get(table, set())
    row: dict[str, Any] = {}
    for key, value in fields.items():
        key = ALIASES.get(key, key)
        if key not in allowed:
            raise ValueError(f"{what}: unknown field {key!r}; known fields: {', '.join(allowed)}")
        if key in json_cols:
            row[key] = None if value is None else dumps(value)
        elif isinstance(value, bool):
            row[key] = int(value)
        else:
            row[key] = sql_value(value)
    return row


def number(value: Any) -> int | float | None:
    """A numeric column's value as stored, or None where it holds no number."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def decode_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    for key in NUMERIC_COLUMNS.get(table, ()):
        if key in row:
            row[key] = number(row[key])
    for key in JSON_COLUMNS.get(table, ()):
        if key in row:
            row[key] = loads(row[key])
    for key in BOOL_COLUMNS.get(table, ()):
        if row.get(key) is not None:
            row[key] = bool(row[key])
    return row


def check_run_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")


def check_pair(fields: Mapping[str, Any]) -> None:
    if "status" in fields and fields["status"] not in PAIR_STATUSES:
        raise ValueError(f"pair status must be one of {', '.join(PAIR_STATUSES)}, not {fields['status']!r}")
    if fields.get("labeler") is not None and fields["labeler"] not in LABELERS:
        raise ValueError(f"pair labeler must be one of {', '.join(LABELERS)}, not {fields['labeler']!r}")
