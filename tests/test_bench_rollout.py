"""`lactchain bench rollout` as a job of the table, on the tiny actor: the hf report's
rates and answer checks, recorded as a bench run; bad options refused in one line
before any run exists. (Side by side with vLLM: tests/test_vllm_engine.py.)"""

from __future__ import annotations

import json

import pytest

from lactchain.runs.registry import Registry

pytestmark = pytest.mark.usefixtures("one_thread")


def test_bench_rollout_is_a_recorded_job_with_its_report(lc, tmp_path):
    db = tmp_path / "registry.db"
    code, out, err = lc("bench", "rollout", "--actor", "tiny", "--envs", "4", "--steps", "1", "--db", db, "--json")
    assert code == 0, err
    result = json.loads(out)
    for key in ("batched", "sequential", "generate", "uncached", "bf16"):
        assert result[f"{key}_env_steps_per_s"] > 0, key
    assert result["prefix_cache_identical"] is True  # the cache changes no greedy answer
    assert 0.0 <= result["bf16_agreement"] <= 1.0 and result["batched_parse_failure_rate"] == 0.0
    with Registry(db) as reg:
        run = reg.get_run(result["run_id"])
        assert run["kind"] == "bench" and run["status"] == "FINISHED"
        assert reg.params(run["id"])["engines"] == "hf" and reg.params(run["id"])["envs"] == 4
        assert reg.latest_artifact(run["id"], "report")["path"] == result["report"]
        assert [r["value"] for r in reg.metric_history(run["id"], "prefix_cache_speedup")] == [
            pytest.approx(result["prefix_cache_speedup"])]
    saved = json.loads(open(result["report"]).read())
    assert saved["batched_env_steps_per_s"] == result["batched_env_steps_per_s"]


def test_bad_bench_rollout_options_are_one_line_before_any_run(lc, tmp_path):
    db = tmp_path / "registry.db"
    code, out, err = lc("bench", "rollout", "--actor", "tiny", "--engines", "hf,tgi", "--db", db)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "--engines 'hf,tgi': use a comma-separated list of hf, vllm" in err and not db.exists()
    for argv, words in ((["--actor", str(tmp_path / "no-model")], "no-model"),
                        (["--actor", "tiny", "--adapter", "actor-00000000"], "actor-00000000")):
        code, out, err = lc("bench", "rollout", *argv, "--db", db)
        assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    if db.exists():
        with Registry(db) as reg:
            assert reg.list_runs() == []
