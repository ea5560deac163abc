"""Which preference pairs a train-actor run trains on: the labeled pairs of some runs
from one labeler, less what says nothing (chosen == rejected), is not labeled yet or is
malformed, each counted, so an empty selection is refused saying what was found."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

LABELER_CHOICES = ("critic", "rollout", "oracle", "human", "llm", "episodes", "any")


class NoUsablePairs(ValueError):
    """Nothing to train on: no pairs, or none that prefers one move list over another."""


@dataclass
class PairSelection:
    """The usable pairs and what was left out (and why)."""

    pairs: list[dict[str, Any]]
    found: int = 0
    dropped_identical: int = 0
    dropped_unlabeled: int = 0
    dropped_malformed: int = 0

    def stats(self) -> dict[str, int]:
        return {"pairs": len(self.pairs), "found": self.found, "dropped_identical": self.dropped_identical,
                "dropped_unlabeled": self.dropped_unlabeled, "dropped_malformed": self.dropped_malformed}

    def __len__(self) -> int:
        return len(self.pairs)


def usable_pair(p: Mapping[str, Any]) -> str | None:
    """None if the pair can be trained on, else why not ("identical", "malformed")."""
    chosen, rejected = p.get("chosen"), p.get("rejected")
    if not isinstance(p.get("prompt"), str) or not p["prompt"].strip():
        return "malformed"
    if not isinstance(chosen, (list, tuple)) or not isinstance(rejected, (list, tuple)):
        return "malformed"
    if list(chosen) == list(rejected):
        return "identical"
    return None


def filter_pairs(rows: Sequence[Mapping[str, Any]], *, require_labeled: bool = True) -> PairSelection:
    sel = PairSelection(pairs=[], found=len(rows))
    for p in rows:
        if require_labeled and p.get("status", "labeled") != "labeled":
            sel.dropped_unlabeled += 1
            continue
        why = usable_pair(p)
        if why == "identical":
            sel.dropped_identical += 1
        elif why == "malformed":
            sel.dropped_malformed += 1
        else:
            sel.pairs.append(dict(p))
    return sel


def human_labels_of(registry: Any, run_ids: Sequence[str], already: set[int] | None = None) -> list[dict[str, Any]]:
    """The human labels of the pairs of `run_ids`, wherever they are stored: the console
    writes a label of a critic's pair as a new row in its session's `labels` run (the
    pair itself stays as the critic ranked it), so a label belongs to the run of the pair
    it labels too, and `--pairs-from PAIRS --labeler human` finds it."""
    labelled = {p["id"] for p in registry.pairs(run_ids=list(run_ids))}
    out = []
    for row in registry.pairs(labeler="human"):
        meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
        if row["id"] not in (already or set()) and meta.get("source_pair") in labelled and not meta.get("undone"):
            out.append(row)
    return out


def select_pairs(registry: Any, run_ids: str | Sequence[str] | None = None, labeler: str = "any") -> PairSelection:
    """Labeled pairs of `run_ids` (all runs when None/empty) from `labeler` ("critic",
    "human", "llm", "episodes" or "any"). Raises NoUsablePairs, saying what was found
    and dropped, when nothing is left to train on."""
    if labeler not in LABELER_CHOICES:
        raise ValueError(f"labeler must be one of {', '.join(LABELER_CHOICES)}, not {labeler!r}")
    if isinstance(run_ids, str):
        run_ids = [run_ids]
    ids = [registry.resolve_run_id(r) if hasattr(registry, "resolve_run_id") else r for r in (run_ids or [])]
    rows = registry.pairs(run_ids=ids or None, labeler=None if labeler == "any" else labeler)
    if ids and labeler == "human":
        rows += human_labels_of(registry, ids, already={r["id"] for r in rows})
    sel = filter_pairs(rows)
    if not sel.pairs:
        where = f"run(s) {', '.join(ids)}" if ids else "the registry"
        who = "any labeler" if labeler == "any" else f"labeler {labeler!r}"
        detail = (f"{sel.found} pair(s) found, {sel.dropped_identical} dropped because chosen == rejected, "
                  f"{sel.dropped_unlabeled} not labeled (pending/skipped/tie), {sel.dropped_malformed} malformed")
        raise NoUsablePairs(f"no usable preference pairs from {who} in {where}: {detail}. "
                            "Build pairs first (`lactchain collect-pairs ...`) or label the pending ones in the TUI.")
    return sel
