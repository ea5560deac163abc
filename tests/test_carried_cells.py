"""Which record of a cell a --cells-from folder gives, when it holds more than one."""

from __future__ import annotations

import json

from lactchain.bench.carried_cells import STRATEGY_CELLS, cells_folder, read_cells


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
