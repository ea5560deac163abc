"""`lactchain bench console`: the console's speed measured on the real app (Pilot, headless),
printed as JSON with its targets (the figures themselves are benchmarks, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_console_measures_the_real_app_and_prints_json_with_its_targets(lc):
    res = subprocess.run([sys.executable, "-m", "lactchain.cli", "bench", "console", "--rounds", "2", "--no-job",
                          "--quit-actor", "tiny", "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    idle = out["idle"]
    assert idle["first_paint_s"] > 0 and idle["quit_s"] > 0
    assert 0 < idle["switch_median_ms"] <= idle["switch_max_ms"]
    # the paint time is inside Pilot's round trip; the stock-mask pass is measured beside it
    assert idle["switch_median_ms"] <= idle["roundtrip_median_ms"]
    assert out["stock_mask"]["switch_median_ms"] > 0 and "stock_mask" not in out["met"]
    assert set(out["met"]["idle"]) == {"switch_median_ms", "switch_max_ms", "first_paint_s", "quit_s", "launch_ms",
                                       "launch_row_ms", "quit_loaded_s"}
    assert idle["actor"] == "tiny" and 0 < idle["quit_loaded_s"] and 0 < idle["python_exit_s"]
    assert idle["launch_ms"] > 0  # a Play job started from the Jobs form, through the job layer
    assert idle["launch_row_ms"] >= idle["launch_ms"]  # ... and its row in the jobs table
    assert "under_job" not in out and out["targets"]["switch_median_ms"] == 100.0
    code, _, err = lc("bench", "console", "--rounds", "1")  # refused before any app starts
    assert code != 0 and "--rounds" in err and "Traceback" not in err
