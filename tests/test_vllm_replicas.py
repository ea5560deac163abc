"""Data-parallel rollouts: `ReplicaPool` (lactchain.models.vllm_replicas).

Runs anywhere: how replicas are pinned to devices (GPUs via CUDA_VISIBLE_DEVICES, CPU
cores via affinity and VLLM_CPU_OMP_THREADS_BIND), what the run's params record, and the
CLI's one-line refusals before any run (more replicas than devices; --data-parallel-size
with the hf engine), none of which needs vLLM.

Runs where vLLM is installed, else skipped: two replicas of the tiny-h32 model on the CPU
(one core each) give exactly one engine's greedy move lists, seeded samples and scores
(per-request seeds make sharding invisible), an adapter reaches both replicas, a worker's
error comes back as the caller's exception, a dead replica is an error (never a hang),
and a kill -9 of the job leaves no worker behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from lactchain.models.vllm_engine import EngineSettings
from lactchain.models.vllm_replicas import _cpu_bind, device_slices, replica_env
from test_vllm_engine import (  # noqa: F401  (fixtures, reused)
    _prompts,
    engine_env_vars,
    h32,
    needs_vllm,
    trained_adapter,
    vllm_h32,
)

# ---- pure: devices, params, CLI refusals -------------------------------------------------------


def test_each_replica_gets_its_own_devices(monkeypatch):
    assert device_slices(2, 1, [0, 1], "cpu") == [[0], [1]]
    assert device_slices(3, 1, list(range(8)), "cpu") == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert device_slices(2, 1, list(range(8)), "cpu", cpu_threads=2) == [[0, 1], [2, 3]]
    assert device_slices(2, 2, list(range(5)), "cuda") == [[0, 1], [2, 3]]  # replica r: GPUs r*tp .. r*tp+tp-1
    assert _cpu_bind([4, 5, 6, 7], 2) == "4,5|6,7" and _cpu_bind([0, 1, 2], 1) == "0,1,2"
    env = replica_env("cpu", [2, 3], EngineSettings())
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "2,3" and env["OMP_NUM_THREADS"] == "2"
    assert "CUDA_VISIBLE_DEVICES" not in env
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert replica_env("cuda", [2, 3], EngineSettings(tensor_parallel_size=2))["CUDA_VISIBLE_DEVICES"] == "2,3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7,9")  # an outer mask: its GPUs, in its order
    assert replica_env("cuda", [2, 3], EngineSettings())["CUDA_VISIBLE_DEVICES"] == "7,9"
    for args, words in (((3, 1, [0, 1], "cpu"), "3 engine replicas x 1 tensor-parallel rank need at least 3 CPU"),
                        ((3, 2, [0, 1, 2, 3], "cuda"), "3 engine replicas x 2 GPUs (tensor parallel) need 6 GPUs; 4"),
                        ((1, 4, [0, 1], "cpu"), "1 engine replica x 4 tensor-parallel ranks")):
        with pytest.raises(ValueError) as err:
            device_slices(*args)
        assert words in str(err.value) and "\n" not in str(err.value)


def test_engine_choice_records_data_parallel_only_when_asked():
    from lactchain.jobs.engine import EngineConfig as EngineChoice

    assert EngineChoice("vllm", None, 1, 2).params() == {"engine": "vllm", "dtype": None, "data_parallel_size": 2}
    assert "data_parallel_size" not in EngineChoice("vllm", None, 2, 1).params()
    assert EngineChoice("vllm", None, 1, 2).load_kw()["data_parallel_size"] == 2
    assert EngineChoice("hf").load_kw()["data_parallel_size"] is None


def test_data_parallel_refusals_are_one_line_and_create_no_run(tmp_path, capsys, monkeypatch):
    import torch

    from cli_helpers import run_cli

    db = tmp_path / "registry.db"
    code, out, err = run_cli(["play", "--actor", "tiny", "--engine", "hf", "--data-parallel-size", "2", "--db", db],
                             capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and not db.exists()
    assert "--data-parallel-size 2 runs vLLM engine replicas: use it with --engine vllm" in err
    # More replicas than cores: refused before vLLM is even looked for (as where it is not installed).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "vllm", None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    many = ["--data-parallel-size", str(min(64, cores + 1))] + (["--tensor-parallel-size", "2"] if cores >= 64 else [])
    code, out, err = run_cli(["play", "--actor", "tiny", "--engine", "vllm", *many, "--db", db], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and not db.exists(), err
    assert "engine replicas x" in err and f"CPU cores (one each); {cores} here" in err
    assert "lower --data-parallel-size" in err
    # auto settles on hf here (no vLLM, or a model it cannot run): replicas are refused too.
    code, out, err = run_cli(["play", "--actor", "tiny", "--engine", "auto", "--data-parallel-size", "2",
                              "--db", db], capsys)
    assert code == 2 and err.count("\n") == 1 and "--engine auto chose hf here" in err and not db.exists()


# ---- with vLLM: two replicas of tiny-h32 on the CPU, one core each ----------------------------


@pytest.fixture(scope="module")
def pool(h32):
    from lactchain.models.vllm_engine import VLLMActor
    from lactchain.models.vllm_replicas import ReplicaPool

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two replicas need two cores")
    t0 = time.perf_counter()
    replicas = VLLMActor.load(str(h32), device="cpu", dtype="float32", data_parallel_size=2)
    print(f"2 replicas started in {time.perf_counter() - t0:.1f} s")
    assert isinstance(replicas, ReplicaPool)
    yield replicas
    replicas.close()


def _cores(pid: int) -> str:
    with open(f"/proc/{pid}/status") as fh:
        return next(line.split(":")[1].strip() for line in fh if line.startswith("Cpus_allowed_list"))


@needs_vllm
def test_two_replicas_answer_exactly_like_one_engine(pool, vllm_h32):
    prompts = _prompts(16)
    assert pool.replicas == 2 and len(set(pool.worker_pids)) == 2 and os.getpid() not in pool.worker_pids
    cores = sorted(os.sched_getaffinity(0))[:2]
    assert [_cores(pid) for pid in pool.worker_pids] == [str(c) for c in cores]  # each pinned to its own core
    assert [r["cores"] for r in pool.describe()["replicas"]] == [[c] for c in cores]
    assert pool.describe()["data_parallel_size"] == 2 and pool.engine == "vllm"
    for attr in ("moves", "max_moves", "eos_token_id"):
        assert getattr(pool, attr) == getattr(vllm_h32, attr), attr
    assert pool.context_length() == vllm_h32.context_length()
    assert pool.chat_prompt(prompts[0]) == vllm_h32.chat_prompt(prompts[0])
    assert pool.count_tokens(prompts[0]) == vllm_h32.count_tokens(prompts[0])

    one = vllm_h32.generate(prompts)  # greedy, fp32, constrained
    two = pool.generate(prompts)
    assert [s.moves for s in two] == [s.moves for s in one] and [s.token_ids for s in two] == [s.token_ids for s in one]
    assert len({tuple(s.moves) for s in one}) > 1
    # Seeded sampling: each shard carries the seeds one engine gives its rows.
    one = vllm_h32.generate(prompts, temperature=1.0, seed=5, num_samples=2)
    two = pool.generate(prompts, temperature=1.0, seed=5, num_samples=2)
    assert len(two) == 32 and [s.token_ids for s in two] == [s.token_ids for s in one]
    assert [s.logprob for s in two] == pytest.approx([s.logprob for s in one], abs=1e-5)
    assert len({s.text for s in two}) > 1  # sampled, not greedy (how many differ is the random model's)
    seeds = [11, 12, 13, 14, 15]  # uneven shards (3 + 2), explicit per-prompt seeds
    one = vllm_h32.generate(prompts[:5], temperature=1.0, seeds=seeds, num_samples=2)
    assert [s.token_ids for s in pool.generate(prompts[:5], temperature=1.0, seeds=seeds, num_samples=2)] == \
        [s.token_ids for s in one]
    assert [s.token_ids for s in pool.generate(prompts[:1], temperature=1.0, seed=5)] == \
        [s.token_ids for s in vllm_h32.generate(prompts[:1], temperature=1.0, seed=5)]  # one shard, one replica
    assert pool.generate([]) == []
    # Scoring, sharded the same way.
    comps = [s.token_ids for s in two[::2]]
    assert pool.completion_logprobs(prompts, comps) == pytest.approx(vllm_h32.completion_logprobs(prompts, comps),
                                                                     abs=1e-5)
    options = ("1", "2", "tie")
    for a, b in zip(pool.choice_logprobs(prompts[:5], options), vllm_h32.choice_logprobs(prompts[:5], options)):
        assert a == pytest.approx(b, abs=1e-5)


def adapter_reaches_both_halves(pool, single, adapter, while_loaded=lambda: None):  # noqa: ANN001, ANN201
    """Loaded on a 2-replica pool, the adapter tunes the rows of both replicas exactly as on
    one engine; unloaded, the base answers come back."""
    prompts = _prompts(16)  # rows 0-7 on replica 0, 8-15 on replica 1
    base = pool.generate(prompts)
    pool.load_adapter(adapter)
    single.load_adapter(adapter)
    try:
        tuned, want = pool.generate(prompts), single.generate(prompts)
        assert [s.token_ids for s in tuned] == [s.token_ids for s in want]
        changed = [i for i, (a, b) in enumerate(zip(base, tuned)) if a.token_ids != b.token_ids]
        assert any(i < 8 for i in changed) and any(i >= 8 for i in changed), changed  # both replicas tuned
        while_loaded()
    finally:
        pool.unload_adapter()
        single.unload_adapter()
    assert [s.token_ids for s in pool.generate(prompts)] == [s.token_ids for s in base]


@needs_vllm
def test_an_adapter_reaches_every_replica(pool, vllm_h32, trained_adapter):
    def merged_once():
        assert pool.adapter == trained_adapter and pool.describe()["adapter"] == str(trained_adapter)
        assert [d.name for d in pool._tmp.iterdir()] == ["merged-1"]  # merged once, for both

    adapter_reaches_both_halves(pool, vllm_h32, trained_adapter, merged_once)
    assert pool.adapter is None and list(pool._tmp.iterdir()) == []


@needs_vllm
def test_a_replicas_error_comes_back_to_the_caller(pool, vllm_h32):
    long = "move forward " * 2000  # longer than the context
    with pytest.raises(Exception) as single:
        vllm_h32.generate([long])
    with pytest.raises(type(single.value)) as err:
        pool.generate(_prompts(1) + [long])  # the error is replica 1's; replica 0 answered
    assert str(err.value) == str(single.value) and "\n" not in str(err.value)
    assert len(pool.generate(_prompts(2))) == 2  # still serving


@needs_vllm
def test_killing_the_job_leaves_no_replica_behind(h32, tmp_path):
    from lactchain.jobs import pid_alive

    script = textwrap.dedent(f"""
        import json, sys, time
        from lactchain.models.vllm_engine import load_generator
        pool = load_generator({str(h32)!r}, "vllm", device="cpu", dtype="float32", data_parallel_size=2)
        assert len(pool.generate(["hello"])) == 1
        print(json.dumps(pool.worker_pids), flush=True)
        time.sleep(600)
    """)
    log = tmp_path / "job.log"
    with open(log, "w") as err:
        job = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=err, text=True,
                               env={**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    try:
        line = job.stdout.readline()
        assert line, f"the job ended before its pool was up: {log.read_text()[-2000:]}"
        pids = json.loads(line)
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait(10)
    end = time.time() + 5
    while time.time() < end and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if pid_alive(p)], "a replica outlived its job"


@needs_vllm
def test_a_dead_replica_is_an_error_not_a_hang(pool):
    from lactchain.jobs import pid_alive
    from lactchain.models.vllm_replicas import ReplicaDied

    pids = pool.worker_pids
    os.kill(pids[1], signal.SIGKILL)
    t0 = time.perf_counter()
    with pytest.raises(ReplicaDied, match=r"replica 1 \(pid \d+\) (ended unexpectedly|cannot be reached)"):
        pool.generate(_prompts(4))
    assert time.perf_counter() - t0 < 20
    with pytest.raises(RuntimeError, match="closed"):  # the pool closed itself: no half-working pool
        pool.generate(_prompts(4))
    assert not any(pid_alive(p) for p in pids)
    pool.close()  # idempotent
