"""Two or three runs side by side: their params and latest metrics in one table, the
settings that differ first (what a researcher looks for when two runs disagree).
`lactchain runs compare` and the console's Runs screen (`=`) show this."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from lactchain.runs.key_metrics import key_metrics_first
from lactchain.runs.schema import NOTE_TAG

MAX_RUNS = 3  # side by side at 80 columns


@dataclass
class Comparison:
    """Rows of (section, key, one value per run, differs?)."""

    runs: list[dict[str, Any]]
    rows: list[tuple[str, str, list[Any], bool]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"runs": [r["id"] for r in self.runs],
                "rows": [{"section": s, "key": k, "values": v, "differs": d} for s, k, v, d in self.rows]}


def _differs(values: Sequence[Any]) -> bool:
    return len({repr(v) for v in values}) > 1


def compare_runs(registry: Any, run_ids: Sequence[str], *, all_params: bool = True) -> Comparison:
    """The runs (ids or unique prefixes; 2 to MAX_RUNS of them) side by side: their notes
    (where any has one), the params that differ, then (with `all_params`) those they share, then the latest metrics, the
    kind's key metric first. RunNotFound / ValueError name a bad id or count."""
    if not 2 <= len(run_ids) <= MAX_RUNS:
        raise ValueError(f"compare takes 2 to {MAX_RUNS} runs, got {len(run_ids)}")
    runs = [registry.get_run(r) for r in run_ids]
    ids = [r["id"] for r in runs]
    if len(set(ids)) < len(ids):
        raise ValueError(f"compare names run {next(i for i in ids if ids.count(i) > 1)} more than once")
    params = [registry.params(i) for i in ids]
    metrics = [registry.latest_metrics(i) for i in ids]
    table = Comparison(runs)
    notes = [registry.tags(i).get(NOTE_TAG) for i in ids]
    if any(notes):  # a researcher's own words about each run, above its settings
        table.rows.append(("note", NOTE_TAG, notes, _differs(notes)))
    keys = sorted(set().union(*params))
    rows = [("params", k, [p.get(k) for p in params]) for k in keys]
    differing = [r for r in rows if _differs(r[2])]
    table.rows += [(s, k, v, True) for s, k, v in differing]
    if all_params:
        table.rows += [(s, k, v, False) for s, k, v in rows if not _differs(v)]
    merged: dict[str, Any] = {}
    for m in metrics:
        merged.update({k: v for k, v in m.items() if k not in merged})
    for key in key_metrics_first(str(runs[0].get("kind")), merged):
        values = [m.get(key) for m in metrics]
        table.rows.append(("metrics", key, values, _differs(values)))
    return table
