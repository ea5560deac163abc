"""Which record of a cell a --cells-from folder gives, when it holds more than one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lactchain.bench.carried_cells import STRATEGY_CELLS, cells_folder, read_cells

DOCS_CELLS = Path(__file__).resolve().parent.parent / "docs" / "results" / "strategy-30min"


def _cell(key: str, run_id: str) -> dict:
    proposer, seed = key.split("-seed")
    return {"key": key, "proposer": proposer, "seed": int(seed), "curve": [], "run_id": run_id}


def test_a_cell_file_wins_over_the_summary_beside_it(tmp_path):
    """A docs copy holds its bench's summary; a cell rerun (or a later variant of a
    proposer) put into its cells/ is the one a bench keeps, the summary's others stay."""
    folder = tmp_path / "strategy-30min"
    (folder / "cells").mkdir(parents=True)
    summary = {"budget_min": 30.0, "cells": [_cell("edits-seed0", "old-edits"), _cell("demos-seed0", "old-demos")]}
    (folder / "bench_strategy.json").write_text(json.dumps(summary))
    (folder / "cells" / "demos-seed0.json").write_text(json.dumps(_cell("demos-seed0", "new-demos")))
    (folder / "cells" / "demos-seed1.json").write_text(json.dumps(_cell("demos-seed1", "seed-one")))

    cells = read_cells(STRATEGY_CELLS, cells_folder(folder))

    assert {k: c["run_id"] for k, c in cells.items()} == {
        "demos-seed0": "new-demos", "demos-seed1": "seed-one", "edits-seed0": "old-edits"}


def test_a_summary_alone_gives_its_cells(tmp_path):
    (tmp_path / "bench_strategy.json").write_text(json.dumps({"cells": [_cell("llm-seed0", "r1")]}))
    assert {k: c["run_id"] for k, c in read_cells(STRATEGY_CELLS, cells_folder(tmp_path)).items()} == {"llm-seed0": "r1"}


def test_strategy_cells_from_before_dtype_auto_are_kept_at_float32_only():
    """The nine cells in docs/results generated in float32 and recorded no dtype (--dtype
    had no default then): a bench at bfloat16 refuses them by name, one at float32 keeps
    them, so a table never mixes the two."""
    from lactchain.jobs.strategy import BenchStrategyConfig

    def kept(dtype: str) -> list[dict]:
        return BenchStrategyConfig(seeds="0,1,2", cells_from=str(DOCS_CELLS), engine={"dtype": dtype}).kept_cells()

    assert len(kept("float32")) == 9
    with pytest.raises(ValueError, match=r"was run with dtype 'float32' \(this benchmark: 'bfloat16'\)"):
        kept("bfloat16")
