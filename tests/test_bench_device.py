"""`lactchain bench device` on the CPU with the tiny models: the report a GPU run is
read by (device, dtype, per-phase seconds, tokens/s, utilisation), the answer checks
of the fast paths, a profile per phase, and one-line refusals of bad options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lactchain.bench.device import parameters_of, spec_peak_tflops

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_the_report_on_the_cpu_has_every_phase_and_the_answers_match_and_is_a_recorded_job(lc, tmp_path, monkeypatch):
    """Every phase on the tiny models, run as a job like any other: a registry run with its
    report as an artifact and each phase's seconds as metrics (one bench run checks both:
    its evaluate phase alone is ~20 s of generation on 2 cores). With --compiled the train
    step is also timed under torch.compile, traced with "aot_eager" here (inductor needs a C++
    compiler and ~50 s per compile on this CPU; the GPU bench runs inductor)."""
    from lactchain.bench.device import PHASES
    from lactchain.jobs.table import JOBS
    from lactchain.runs.registry import Registry
    from lactchain.train import compiled

    monkeypatch.setattr(compiled, "COMPILE_BACKEND", "eager")

    assert JOBS["bench device"].config().chosen == PHASES  # by default every phase the bench has
    db = tmp_path / "registry.db"
    code, out, err = lc("bench", "device", "--actor", "tiny", "--critic", "tiny", "--envs", "64", "--steps", "1",
                        "--critic-texts", "64", "--train-steps", "2", "--eval-rounds", "1", "--compiled",
                        "--save", tmp_path / "results", "--db", db, "--json")
    assert code == 0, err
    report = json.loads(out)
    with Registry(db) as reg:
        run = reg.get_run(report["run_id"])
        assert run["kind"] == "bench" and run["status"] == "FINISHED"
        assert reg.latest_artifact(run["id"], "report")["path"] == report["report"]
        for phase, row in report["phases"].items():
            assert [r["value"] for r in reg.metric_history(run["id"], f"{phase}/seconds")] == [row["seconds"]]
        assert reg.params(run["id"])["phases"] == ",".join(report["phases"])
    assert json.loads(Path(report["report"]).read_text())["phases"]["evaluate"]["states"] == 60
    assert report["device_type"] == "cpu" and report["device"]
    assert report["dtype"] in ("bfloat16", "float32")
    assert report["actor_parameters"] > 0 and report["matmul_tflops"]
    assert report["attention"] == "lactchain_grouped_sdpa"  # which attention the phases ran, in the report
    assert set(report["phases"]) == {"evaluate", "rollout", "critic_encode", "train_step", "grpo_step"}
    grpo = report["phases"].pop("grpo_step")
    assert grpo["steps"] == 2 and grpo["s_per_step"] > 0 and grpo["generations"] == 4
    assert 0 < grpo["last_sample_s"] <= grpo["last_rollout_s"] < grpo["last_step_s"]  # where a step's time goes
    for name, row in report["phases"].items():
        assert row["seconds"] > 0 and row["tokens_per_s"] > 0, name
        assert 0 < row["utilisation_vs_matmul"], name
        assert row["utilisation_vs_spec"] is None  # no data-sheet peak for a CPU
    evaluate = report["phases"]["evaluate"]
    assert evaluate["states"] == 60 and evaluate["strict"] == evaluate["env_steps"] >= 60 and evaluate["rounds"] == 1
    assert evaluate["grammar_identical"] is True and evaluate["prefix_cache_identical"] is True
    assert evaluate["static_cache_identical"] is True and evaluate["static_cache_seconds"] > 0
    # each variant's first (cold) run is reported beside its best: compiling shows there
    assert all(evaluate[f"{v}_cold_seconds"] > 0 for v in ("evaluate", "xgrammar", "other_cache", "static_cache"))
    rollout = report["phases"]["rollout"]
    assert 0 <= rollout["prefix_cache_agreement"] <= 1 and rollout["rounds"] == 1 and rollout["prefix_cache_speedup"] > 0
    train = report["phases"]["train_step"]
    assert train["steps"] == 2 and train["s_per_step"] > 0 and train["bf16_s_per_step"] > 0 and train["fp32_s_per_step"] > 0
    assert 0 < train["shared_prefix_tokens"] < train["tokens_per_step"]  # the pairs' common prompt counted once
    # the CPU's default shares the prefix; the step with every row run whole (a GPU's default) timed beside it
    assert train["shared_prefix"] is True and train["s_per_step"] == train["shared_prefix_s_per_step"]
    assert train["whole_rows_s_per_step"] > 0 and train["shared_prefix_speedup"] > 0
    assert train["rft_whole_rows_s_per_step"] > 0 and train["rft_shared_prefix_speedup"] > 0  # the loop's default loss
    # 4x the pairs a step (what a token budget fills), pairs per second against the 8-pair step
    assert train["large_batch_pairs"] == 32 and train["large_batch_s_per_step"] > 0
    assert train["large_batch_pairs_per_s_gain"] == pytest.approx(
        32 / train["large_batch_s_per_step"] / (8 / train["median_step_s"]))
    for loss in ("", "rft_"):  # each loss compiled, its compile (the first step) apart, against its plain step
        assert train[f"{loss}compiled_s_per_step"] > 0 and train[f"{loss}compiled_first_step_s"] > 0
        plain, compiled = train[f"{loss}plain_median_s_per_step"], train[f"{loss}compiled_s_per_step"]
        assert plain > 0 and train[f"{loss}compiled_speedup"] == pytest.approx(plain / compiled)  # median vs median
    assert evaluate["cudnn_sdpa"] is report["cudnn_sdpa"] and "cudnn_sdpa_seconds" not in evaluate  # a CUDA variant
    assert "profile" not in report
    saved = json.loads((tmp_path / "results").glob("device-*.json").__next__().read_text())
    assert saved["phases"]["evaluate"]["states"] == 60
    # a profile per phase asked for: a trace and an op table (apart, as a profiler's own cost
    # would be in every figure of the run)
    code, out, err = lc("bench", "device", "--actor", "tiny", "--critic", "tiny", "--phases", "critic_encode",
                        "--critic-texts", "16", "--profile", tmp_path / "prof", "--db", db, "--json")
    assert code == 0, err
    profiled = json.loads(out)
    assert set(profiled["phases"]) == {"critic_encode"} and profiled["profile"] == str((tmp_path / "prof").resolve())
    assert (tmp_path / "prof" / "critic_encode.trace.json").stat().st_size > 0
    assert "Self CPU" in (tmp_path / "prof" / "critic_encode.txt").read_text()


@pytest.mark.parametrize("argv, words", [
    (["--phases", "evaluate,decode"], "--phases"),
    (["--device", "tpu"], "--device"),
    (["--eval-rounds", "0"], "--eval-rounds"),
    (["--actor", "no-such-model"], "no-such-model"),
])
def test_bad_options_are_one_line_refusals(lc, argv, words):
    code, out, err = lc("bench", "device", "--actor", "tiny", "--critic", "tiny", *argv)
    assert code != 0 and out == ""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in err


def test_gpu_is_the_same_command(lc):
    code, out, _ = lc("bench", "gpu", "--help")
    assert code == 0 and "utilisation" in out


def test_card_peaks_and_parameter_count():
    assert spec_peak_tflops("NVIDIA H100 80GB HBM3") == pytest.approx(989.4)
    assert spec_peak_tflops("NVIDIA H100 PCIe") == pytest.approx(756.0)
    assert spec_peak_tflops("NVIDIA H200") == pytest.approx(989.4)
    assert spec_peak_tflops("Some Future Card") is None
    import torch

    tied = torch.nn.Linear(4, 4, bias=False)
    model = torch.nn.Sequential(tied, tied)
    assert parameters_of(model) == 16


def test_model_flops_count_the_embedding_as_a_lookup_and_the_head_where_logits_are_taken(tiny_actor):
    from lactchain.bench.device import model_flops

    model = tiny_actor.model
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    body = parameters_of(model) - emb.numel() - (0 if head is emb else head.numel())
    assert 0 < body < parameters_of(model)
    assert model_flops(model, 10, 0) == 2 * body * 10
    assert model_flops(model, 10, 3) == 2 * (body * 10 + head.numel() * 3)
    assert model_flops(model, 10, 10, training=True) == 6 * (body + head.numel()) * 10


def test_a_kill_stops_the_bench_inside_a_long_phase(lc, tmp_path):
    """`runs kill` (SIGTERM) lands inside a phase, not at its end: on a CPU one phase of
    the default models ran 20+ minutes, and a `timeout 900` around it waited 37 minutes.
    A train_step phase of 1,000 CPO-SimPO steps (twice on a CPU: both precisions) is
    killed once it trains; the run ends KILLED within the kill's 60-second wait."""
    from cli_helpers import wait_until
    from lactchain.runs.registry import Registry

    db = tmp_path / "registry.db"
    code, out, err = lc("bench", "device", "--actor", "tiny", "--critic", "tiny", "--phases", "train_step",
                        "--train-steps", "1000", "--db", db, "--detach", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    with Registry(db) as reg:
        log = reg.run_dir(run_id) / "log.txt"
        wait_until(lambda: log.is_file() and "timing train_step" in log.read_text(), timeout=300)
        code, _, err = lc("runs", "kill", run_id, "--wait", "60", "--db", db)
        assert code == 0, err
        assert reg.get_run(run_id)["status"] == "KILLED", log.read_text()[-2000:]
