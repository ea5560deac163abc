"""A trajectory archive as a Hugging Face dataset (issue 12): Parquet plus a dataset
card, so an archive can be shared (a folder, the Hub) and brought back losslessly.
Grid-only by nature, as the archive is (its rows are grid trajectories on scenes).

Layout of an export folder (what `load_dataset("parquet", data_dir=DIR)`,
`load_dataset(DIR)` and the Hub understand):

    DIR/data/train-00000-of-00001.parquet   one row per trajectory
    DIR/README.md                           the dataset card (YAML header + fields, scenes, counts)
    DIR/lactchain_archive.json              the manifest: format, rows, columns, source run, sha256

Column types make `load(export(rows)) == rows` hold exactly:

- regular fields are typed columns (key, env, seed int64 or null, start and path as
  pose structs, actions list<list<string>>, rewards list<float64>, bd, annotations,
  descriptions), so the Hub's viewer and `datasets` users get real types;
- free-form dicts are JSON strings (`env_kwargs_json` with the full scene, `policy_json`);
- anything else goes to `extra_json`: keys this module does not know (a later row
  format), and any regular field whose value does not fit its typed column (an int
  reward, a pose with an extra key) -- stored as is, never coerced.

A typed column's null means "the row has no such key" (seed: null means None). The
export checks the round trip in memory before writing anything, and `load` refuses a
folder that is incomplete, truncated, altered or not an archive, naming the problem.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from lactchain.envs.scenes import get_scene
from lactchain.runs.checkpoints import sha256_file

FORMAT = "lactchain-archive"
FORMAT_VERSION = 1
MANIFEST_FILE = "lactchain_archive.json"
CARD_FILE = "README.md"
DATA_FILE = "data/train-00000-of-00001.parquet"

# The typed columns: a tiny schema language ("string", "int64", "float64", "bool",
# [item], {field: spec}) read both by `_fits` and by `features()`.
POSE = {"x": "int64", "y": "int64", "orientation": "string"}
TYPED: dict[str, Any] = {
    "key": "string",
    "env": "string",
    "seed": "int64",
    "start": POSE,
    "actions": [["string"]],
    "path": [POSE],
    "rewards": ["float64"],
    "bd": {"final": ["int64"], "visited": ["string"]},
    "annotations": [{"t": "int64", "landmark": "string", "relation": "string", "text": "string"}],
    "descriptions": [{"describer": "string", "model": "string", "prompt_version": "string", "text": "string",
                      "order_correct": "bool"}],
}
JSON_COLUMNS = {"env_kwargs": "env_kwargs_json", "policy": "policy_json"}
EXTRA_COLUMN = "extra_json"
COLUMNS = [*TYPED, *JSON_COLUMNS.values(), EXTRA_COLUMN]
REQUIRED_KEYS = ("env", "env_kwargs", "start", "seed", "actions", "path", "rewards")  # Trajectory.from_dict's

FIELD_DOCS: dict[str, tuple[str, str]] = {
    "key": ("string", "the behaviour descriptor's key, `x,y|landmark>landmark`: the MAP-Elites bin this elite holds"),
    "env": ("string", "the environment id the trajectory was played in (`grid`: LactChain/GridWorld-v0)"),
    "seed": ("int64, null", "the reset seed (null: none)"),
    "start": ("struct{x, y, orientation}", "the start pose the episode was reset to"),
    "actions": ("list<list<string>>", "the actions as executed: each a list of moves (`move forward`, `turn left`, "
                                      "`turn right`)"),
    "path": ("list<struct{x, y, orientation}>", "every pose: the start, then one per move executed"),
    "rewards": ("list<float64>", "the reward after each action"),
    "bd": ("struct{final: list<int64>, visited: list<string>}",
           "the behaviour descriptor: the final cell and the landmarks entered, in order"),
    "annotations": ("list<struct{t, landmark, relation, text}>",
                    "coarse annotations: at t = 0 and wherever the relation to the nearest landmark changes"),
    "descriptions": ("list<struct{describer, model, prompt_version, text, order_correct}>, null",
                     "natural-language descriptions of the trajectory, with whether each names the landmarks in "
                     "the right order (null: none made)"),
    "env_kwargs_json": ("string (JSON)", "the env's kwargs, the scene as a full dict (name, size, goal, start, "
                                         "landmarks): `json.loads` it; replays need nothing else"),
    "policy_json": ("string (JSON)", "who produced the actions (e.g. {\"kind\": \"random-walk\", \"seed\": 0, "
                                     "\"index\": 7})"),
    "extra_json": ("string (JSON), null", "other keys of the row (a later format) and any field whose value "
                                          "does not fit its typed column; they override the typed columns"),
}


# ---- rows <-> records ----------------------------------------------------------------

def _fits(value: Any, spec: Any) -> bool:
    """Whether Arrow stores `value` under `spec` and gives back an equal value (nested
    nulls are fine; a bool is no int, an int no float)."""
    if value is None:
        return True
    if isinstance(spec, str):
        if spec == "string":
            return isinstance(value, str)
        if spec == "int64":
            return type(value) is int and -2**63 <= value < 2**63
        if spec == "float64":
            return type(value) is float
        return type(value) is bool
    if isinstance(spec, list):
        return type(value) is list and all(_fits(v, spec[0]) for v in value)
    return type(value) is dict and set(value) == set(spec) and all(_fits(value[k], s) for k, s in spec.items())


def _key_of(row: Mapping[str, Any]) -> str:
    return str(row.get("key", "?"))


def encode_row(row: Mapping[str, Any], index: int = 0) -> dict[str, Any]:
    """One archive row as a record of `COLUMNS` (see the module doc)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"row {index} is not a trajectory object")
    missing = [k for k in REQUIRED_KEYS if k not in row]
    if missing:
        raise ValueError(f"row {index} ({_key_of(row)}) has no {', '.join(missing)}: not a trajectory")
    record: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, spec in TYPED.items():
        value = row.get(name)
        if name not in row or (_fits(value, spec) and (value is not None or name == "seed")):
            record[name] = value
        else:
            record[name] = None
            extra[name] = value
    try:
        for name, column in JSON_COLUMNS.items():
            record[column] = json.dumps(row[name]) if name in row else None
        for name, value in row.items():
            if name not in TYPED and name not in JSON_COLUMNS:
                extra[name] = value
        record[EXTRA_COLUMN] = json.dumps(extra) if extra else None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"row {index} ({_key_of(row)}) is not plain JSON ({exc})") from None
    return record


def decode_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """The archive row a record stores (the inverse of `encode_row`)."""
    row: dict[str, Any] = {}
    for name in TYPED:
        if record.get(name) is not None or name == "seed":
            row[name] = record.get(name)
    for name, column in (*JSON_COLUMNS.items(), (None, EXTRA_COLUMN)):
        text = record.get(column)
        if text is None:
            continue
        try:
            value = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"column {column} is not JSON ({exc})") from None
        if name is not None:
            row[name] = value
        elif isinstance(value, dict):
            row.update(value)
        else:
            raise ValueError(f"column {column} is not a JSON object")
    return row


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def features() -> Any:
    """The `datasets.Features` of an export (the typed columns, then the JSON strings)."""
    from datasets import Features, List, Value

    def build(spec: Any) -> Any:
        if isinstance(spec, str):
            return Value(spec)
        if isinstance(spec, list):
            return List(build(spec[0]))
        return {k: build(s) for k, s in spec.items()}

    return Features({**{k: build(s) for k, s in TYPED.items()},
                     **{c: Value("string") for c in (*JSON_COLUMNS.values(), EXTRA_COLUMN)}})


def to_dataset(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The rows as a `datasets.Dataset`, after checking in memory that every row comes
    back from it equal (a ValueError naming the first one that would not)."""
    from datasets import Dataset

    records = [encode_row(row, i) for i, row in enumerate(rows)]
    dataset = Dataset.from_list(records, features=features())
    for i, (row, record) in enumerate(zip(rows, dataset.to_list())):
        back = decode_row(record)
        if _canonical(back) != _canonical(dict(row)):
            diff = sorted(k for k in set(row) | set(back) if _canonical(row.get(k)) != _canonical(back.get(k)))
            raise ValueError(f"row {i} ({_key_of(row)}) would not survive the export: {', '.join(diff)} changed")
    return dataset


# ---- checks ------------------------------------------------------------------------

def check_row(row: Mapping[str, Any]) -> Any:
    """The row's scene, after checking it parses and that the BD and the annotations
    name only its landmarks; a one-line ValueError otherwise."""
    kwargs = row.get("env_kwargs")
    if not isinstance(kwargs, Mapping) or kwargs.get("scene") is None:
        raise ValueError("its env_kwargs hold no scene")
    try:
        scene = get_scene(kwargs["scene"])
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"its scene does not parse: {exc}") from None
    bd = row.get("bd") if isinstance(row.get("bd"), Mapping) else {}
    named = [("its BD", n) for n in bd.get("visited") or []]
    named += [(f"annotation t={a.get('t')}", a.get("landmark")) for a in row.get("annotations") or []
              if isinstance(a, Mapping)]
    for where, name in named:
        if name not in scene.names:
            raise ValueError(f"{where} names landmark {name!r}, unknown in scene {scene.name!r} "
                             f"(landmarks: {', '.join(scene.names) or 'none'})")
    return scene


def check_rows(rows: Sequence[Mapping[str, Any]], where: str) -> None:
    """Every row is a trajectory whose scene and landmarks parse, or a ValueError naming
    the first bad row."""
    for i, row in enumerate(rows):
        missing = [k for k in REQUIRED_KEYS if k not in row]
        try:
            if missing:
                raise ValueError(f"it has no {', '.join(missing)} (not a trajectory)")
            check_values(row)
            check_row(row)
        except ValueError as exc:
            raise ValueError(f"{where} row {i} ({_key_of(row)}): {exc}") from None


# ---- summary and card -------------------------------------------------------------

def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts for the card and the manifest: trajectories, distinct BDs, scenes,
    landmarks visited, sources and describers. Tolerates odd rows (it only counts)."""
    scenes: dict[str, dict[str, Any]] = {}
    n_visited: Counter[int] = Counter()
    per_landmark: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    describers: Counter[str] = Counter()
    envs: Counter[str] = Counter()
    keys = set()
    for row in rows:
        envs[str(row.get("env"))] += 1
        kwargs = row.get("env_kwargs") if isinstance(row.get("env_kwargs"), Mapping) else {}
        try:
            scene = get_scene(kwargs.get("scene")).as_dict()
            scenes.setdefault(_canonical(scene), scene)
        except (ValueError, TypeError, KeyError):
            pass
        bd = row.get("bd") if isinstance(row.get("bd"), Mapping) else {}
        visited = [str(v) for v in bd.get("visited") or []]
        keys.add(row.get("key") if row.get("key") is not None else _canonical(bd))
        n_visited[len(visited)] += 1
        per_landmark.update(set(visited))
        policy = row.get("policy") if isinstance(row.get("policy"), Mapping) else {}
        sources[str(policy.get("kind", "?"))] += 1
        for d in row.get("descriptions") or []:
            if isinstance(d, Mapping):
                describers[f"{d.get('describer')} ({d.get('model')})"] += 1
    return {"trajectories": len(rows), "distinct_bds": len(keys), "envs": dict(envs),
            "scenes": list(scenes.values()), "landmarks_visited": {str(k): n_visited[k] for k in sorted(n_visited)},
            "trajectories_per_landmark": dict(per_landmark.most_common()), "sources": dict(sources.most_common()),
            "described_rows": sum(1 for r in rows if r.get("descriptions")),
            "describers": dict(describers.most_common())}


def _size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < bound:
            return label
    return "1M<n<10M"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def card(manifest: Mapping[str, Any], summary: Mapping[str, Any], num_bytes: int | None = None) -> str:
    """The dataset card: a YAML header the Hub reads (configs, features, split sizes) and
    a body saying what every field means, the scene(s) and the counts."""
    import yaml

    scene_names = [s["name"] for s in summary["scenes"]] or ["?"]
    header: dict[str, Any] = {
        "pretty_name": f"LactChain trajectory archive ({', '.join(scene_names)})",
        "tags": ["lactchain", "reinforcement-learning", "trajectories", "gridworld", "map-elites"],
        "task_categories": ["reinforcement-learning"],
        "size_categories": [_size_category(summary["trajectories"])],
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]}],
    }
    try:
        split = {"name": "train", "num_bytes": num_bytes, "num_examples": summary["trajectories"]}
        header["dataset_info"] = {"features": features()._to_yaml_list(), "splits": [split],
                                  "download_size": manifest.get("bytes"), "dataset_size": num_bytes}
    except AttributeError:  # a datasets without the YAML writer: the Parquet schema still carries the features
        pass
    n = summary["trajectories"]
    lines = ["---", yaml.safe_dump(header, sort_keys=False).rstrip(), "---", "",
             f"# LactChain trajectory archive: {', '.join(scene_names)}", "",
             f"{n} replayable GridWorld trajectories: the elites of a MAP-Elites archive (one per behaviour "
             "descriptor, the shortest found), each with everything a replay needs (the scene as a full dict, the "
             "start pose, the seed, the actions as executed) and what was observed (the path, the rewards, the "
             f"behaviour descriptor, coarse annotations). Exported from archive run `{manifest.get('source_run')}` "
             "by `lactchain archive export`; `lactchain archive import DIR` brings it back as an archive run, "
             "losslessly, after replaying every trajectory.", "",
             "## Loading", "", "```python", "import json", "from datasets import load_dataset", "",
             'ds = load_dataset("parquet", data_dir="DIR")["train"]  # or load_dataset("DIR"), or a Hub repo id',
             'scene = json.loads(ds[0]["env_kwargs_json"])["scene"]', "```", "",
             "## Fields", "", "| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{c}` | {_cell(t)} | {_cell(m)} |" for c, (t, m) in FIELD_DOCS.items()]
    lines += ["", "A typed column's null means the row has no such key (`seed`: null means no seed). Keys in "
              "`extra_json` override the typed columns.", ""]
    lines += ["## Scenes" if len(summary["scenes"]) > 1 else "## Scene", ""]
    for s in summary["scenes"]:
        st = s["start"]
        lines += [f"### {s['name']}", "",
                  f"{s['size']}x{s['size']} grid (x grows east, y north), goal {tuple(s['goal'])}, start "
                  f"({st['x']}, {st['y']}) facing {st['orientation']}. Landmarks are walkable; entering one "
                  "counts as visiting it.", ""]
        if s["landmarks"]:
            lines += ["| landmark | letter | colour | cells |", "|---|---|---|---|"]
            lines += [f"| {_cell(m['name'])} | {m['letter']} | {m['colour']} | "
                      f"{', '.join(str(tuple(c)) for c in m['cells'])} |" for m in s["landmarks"]]
        else:
            lines.append("No landmarks.")
        lines.append("")
    lines += ["## Counts", "", f"- trajectories: {n}", f"- distinct behaviour descriptors: {summary['distinct_bds']}",
              f"- rows with descriptions: {summary['described_rows']}", "",
              "Landmarks visited per trajectory:", "", "| landmarks visited | trajectories |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary["landmarks_visited"].items()]
    lines += ["", "Trajectories visiting each landmark:", ""]
    if summary["trajectories_per_landmark"]:
        lines += ["| landmark | trajectories |", "|---|---|"]
        lines += [f"| {_cell(k)} | {v} |" for k, v in summary["trajectories_per_landmark"].items()]
    else:
        lines.append("None.")
    lines += ["", "Sources (`policy.kind`):", "", "| source | trajectories |", "|---|---|"]
    lines += [f"| {_cell(k)} | {v} |" for k, v in summary["sources"].items()]
    lines += ["", "Describers:", ""]
    if summary["describers"]:
        lines += ["| describer (model) | descriptions |", "|---|---|"]
        lines += [f"| {_cell(k)} | {v} |" for k, v in summary["describers"].items()]
    else:
        lines.append("None present.")
    lines += ["", "## Files", "",
              f"- `{manifest['data_file']}`: the trajectories ({manifest['rows']} rows, sha256 `{manifest['sha256']}`)",
              f"- `{MANIFEST_FILE}`: the manifest `lactchain archive import` checks (format {FORMAT_VERSION}, row "
              "count, columns, source run, sha256)",
              f"- `{CARD_FILE}`: this card", "",
              f"Made by lactchain {manifest.get('lactchain_version')} on {manifest.get('created')}.", ""]
    return "\n".join(lines)


# ---- export / load ------------------------------------------------------------------

def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lactchain")
    except PackageNotFoundError:
        return "unknown"


def export(rows: Sequence[Mapping[str, Any]], out_dir: str | Path,
           meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write `rows` to `out_dir` as a Hugging Face dataset (Parquet + card + manifest);
    return the manifest. Everything is checked before a file is touched; the manifest
    is written last, so an interrupted export is refused by `load`, never half-read.
    A previous export there is replaced (its manifest first, its stale shards too)."""
    rows = [dict(r) for r in rows]
    check_rows(rows, "the archive")
    dataset = to_dataset(rows)
    out = Path(out_dir)
    data = out / DATA_FILE
    data.parent.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_FILE).unlink(missing_ok=True)
    for stale in data.parent.glob("train-*.parquet"):
        stale.unlink()
    tmp = data.with_name(data.name + ".tmp")
    _quiet_parquet(dataset, tmp)
    os.replace(tmp, data)
    summary = summarize(rows)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "rows": len(rows), "columns": list(COLUMNS),
                "data_file": DATA_FILE, "sha256": sha256_file(data), "bytes": data.stat().st_size,
                **{k: v for k, v in (meta or {}).items() if k not in ("format", "format_version")},
                "scenes": [s["name"] for s in summary["scenes"]], "distinct_bds": summary["distinct_bds"],
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "lactchain_version": _version()}
    manifest.setdefault("source_run", None)
    (out / CARD_FILE).write_text(card(manifest, summary, dataset.data.nbytes))
    tmp = out / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, out / MANIFEST_FILE)
    return manifest


def _quiet_parquet(dataset: Any, path: Path) -> None:
    """`Dataset.to_parquet` without its progress bar on stderr (a CLI's output stays its own)."""
    import datasets

    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        dataset.to_parquet(str(path))
    finally:
        if was:
            datasets.enable_progress_bars()


AGAIN = "export it again with `lactchain archive export RUN DIR`"


def read_manifest(in_dir: str | Path) -> dict[str, Any]:
    """An export's manifest, checked (a one-line ValueError naming the problem and the fix)."""
    folder = Path(in_dir)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give the folder `lactchain archive export` wrote")
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise ValueError(f"{folder} has no {MANIFEST_FILE}: not an archive export, or one that did not finish; {AGAIN}")
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{path} is not JSON (a truncated copy?); copy the folder again, or {AGAIN}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} manifest; {AGAIN}")
    version = manifest.get("format_version")
    if type(version) is not int or version < 1:
        raise ValueError(f"{path} has format version {version!r}, not a version number; {AGAIN}")
    if version > FORMAT_VERSION:
        raise ValueError(f"{path} has format version {version!r}, this lactchain reads up to {FORMAT_VERSION}; "
                         "upgrade lactchain")
    scenes = manifest.get("scenes", [])
    if not isinstance(scenes, list) or not all(isinstance(x, str) and x for x in scenes):
        raise ValueError(f"{path}: scenes must be a list of scene names, got {type(scenes).__name__} "
                         f"{str(scenes)[:60]!r}; {AGAIN}")
    rows, data_file, sha = manifest.get("rows"), manifest.get("data_file"), manifest.get("sha256")
    if type(rows) is not int or rows < 0 or not isinstance(data_file, str) or not isinstance(sha, str):
        raise ValueError(f"{path} lacks its row count, data file or sha256 (a hand-edited manifest?); {AGAIN}")
    if rows == 0:
        raise ValueError(f"{path}: the dataset holds no trajectories; nothing to import")
    if Path(data_file).is_absolute() or ".." in Path(data_file).parts:
        raise ValueError(f"{path}: data file {data_file!r} is outside the folder; {AGAIN}")
    return manifest


def load_export(in_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(manifest, rows) of an export folder, every check passed: the manifest, the
    Parquet file's sha256, its columns and row count, every row decoded and its scene and
    landmarks parsed. A one-line ValueError naming the problem and the fix otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(in_dir)
    manifest = read_manifest(folder)
    data = folder / manifest["data_file"]
    _inside(folder, data)
    if not data.is_file():
        raise ValueError(f"{folder}: {manifest['data_file']} is missing (an incomplete copy?); copy the whole "
                         f"folder again, or {AGAIN}")
    got = sha256_file(data)
    if got != manifest["sha256"]:
        raise ValueError(f"{data}: sha256 {got[:12]}... does not match the manifest's {manifest['sha256'][:12]}... "
                         f"(a truncated or altered file); copy the folder again, or {AGAIN}")
    try:
        table = pq.read_table(data)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{data} is not a readable Parquet file ({' '.join(str(exc).split())}); {AGAIN}") from None
    names = table.column_names
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{data} lacks the column(s) {', '.join(missing)}: not an archive export "
                         f"(format {FORMAT_VERSION}); {AGAIN}")
    unknown = [c for c in names if c not in COLUMNS]
    if unknown:
        raise ValueError(f"{data} has column(s) this lactchain does not know ({', '.join(unknown)}): importing "
                         "would drop them; upgrade lactchain")
    if table.num_rows != manifest["rows"]:
        raise ValueError(f"{data} holds {table.num_rows} rows but the manifest says {manifest['rows']} "
                         f"(a truncated or altered copy); copy the folder again, or {AGAIN}")
    rows = []
    for i, record in enumerate(table.to_pylist()):
        try:
            rows.append(decode_row(record))
        except (ValueError, RecursionError) as exc:
            why = "a value nests too deep" if isinstance(exc, RecursionError) else str(exc)
            raise ValueError(f"{data} row {i} ({record.get('key')}): {why}; {AGAIN}") from None
    keys = [row.get("key") for row in rows if row.get("key") is not None]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"{data}: two rows hold the behaviour {dup!r} (an archive keeps one elite per behaviour); "
                         f"{AGAIN}")
    try:
        check_rows(rows, str(data))
    except ValueError as exc:
        raise ValueError(f"{exc}; the dataset is corrupted: {AGAIN}") from None
    return manifest, rows


def _inside(folder: Path, data: Path) -> None:
    """An untrusted dataset (from the Hub) must not reach outside its folder: no link on
    the way to its data file, and the file resolves inside the folder."""
    part = folder
    for name in data.relative_to(folder).parts:
        part = part / name
        if part.is_symlink():
            raise ValueError(f"{part} is a symbolic link: a dataset's files must be inside its folder (refused, not "
                             f"followed); {AGAIN}")
    if not data.resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"{data} resolves outside {folder} (refused); {AGAIN}")


MAX_JSON_DEPTH = 32  # a trajectory's fields nest a few levels; deeper is a crafted file


def _depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a JSON value, stopping past `limit` (no recursion limit to hit)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            todo.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            todo.extend((x, d + 1) for x in v)
    return deepest


def check_values(row: Mapping[str, Any]) -> None:
    """The row's plain fields hold what a trajectory holds: a seed that is a whole number
    >= 0 (or none), a start pose, finite rewards, no absurdly nested value."""
    import math

    seed = row.get("seed")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise ValueError(f"its seed {seed!r} is not a whole number >= 0")
    if not isinstance(row.get("start"), Mapping):
        raise ValueError(f"its start {str(row.get('start'))[:40]!r} is not a pose {{x, y, orientation}}")
    rewards = row.get("rewards")
    if not isinstance(rewards, list) or not all(type(r) in (int, float) and math.isfinite(r) for r in rewards):
        raise ValueError("its rewards are not a list of finite numbers")
    for name, value in row.items():
        if _depth(value) > MAX_JSON_DEPTH:
            raise ValueError(f"its field {name!r} nests deeper than {MAX_JSON_DEPTH} levels")


def load(in_dir: str | Path) -> list[dict[str, Any]]:
    """The archive rows of an export folder (see `load_export` for the checks)."""
    return load_export(in_dir)[1]

