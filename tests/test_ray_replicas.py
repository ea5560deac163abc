"""vLLM engine replicas as Ray actors (`lactchain.models.ray_replicas`) on a real two-node
Ray cluster started on this machine (`ray.cluster_utils.Cluster`, CPU, one core a node).

Runs everywhere for the one-line refusals (a malformed or unreachable --ray-address, Ray
missing); where Ray and vLLM are installed (the test install has both): two replicas,
one on each node, give exactly one engine's greedy lists, seeded samples and scores at
fp32; an adapter reaches the replica on the other node (its files through Ray, merged
there); `runs kill` and kill -9 of a replicated job leave no actor and no engine process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lactchain.models.ray_replicas import ray_installed
from test_vllm_replicas import adapter_reaches_both_halves
from test_vllm_engine import (  # noqa: F401  (fixtures, reused)
    HAS_VLLM,
    _prompts,
    engine_env_vars,
    h32,
    trained_adapter,
    vllm_h32,
)

_skip_without_ray = pytest.mark.skipif(not (ray_installed() and HAS_VLLM),
                                       reason="needs the ray and vllm extras (scripts/install.sh --scale)")


def needs_ray(test):
    """A check on a Ray cluster of vLLM engines: the scale tier (`pytest -m scale`)."""
    return pytest.mark.scale(_skip_without_ray(test))
# one xdist worker takes the whole module (`--dist loadgroup`): its cluster and pool start once
pytestmark = pytest.mark.xdist_group("ray-cluster")


# ---- refusals: one line, before any run -------------------------------------------------------

@pytest.mark.parametrize("address, words", [
    ("foo", "--ray-address 'foo' is not an address: use auto, HOST:PORT"),
    ("host:99999", "is not an address"),
    ("127.0.0.1:1", "--ray-address 127.0.0.1:1: nothing answers there"),
])
def test_a_bad_ray_address_is_one_line_before_any_run(tmp_path, capsys, address, words):
    from cli_helpers import run_cli

    if not ray_installed():
        pytest.skip("the ray extra is not installed")
    db = tmp_path / "r.db"
    code, out, err = run_cli(["play", "--actor", "tiny", "--engine", "vllm", "--ray-address", address, "--db", db],
                             capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert not db.exists()


def test_ray_address_with_the_hf_engine_or_without_ray_is_refused(tmp_path, capsys, monkeypatch):
    from cli_helpers import run_cli

    code, _, err = run_cli(["play", "--actor", "tiny", "--ray-address", "auto", "--db", tmp_path / "r.db"], capsys)
    assert code == 2 and "use it with --engine vllm, not hf" in err
    monkeypatch.setitem(sys.modules, "ray", None)  # as where the extra is not installed
    monkeypatch.setattr("lactchain.models.ray_replicas.ray_installed", lambda: False)
    code, _, err = run_cli(["evaluate", "--actor", "tiny", "--engine", "vllm", "--ray-address", "auto",
                            "--db", tmp_path / "r.db"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "Ray is not installed here; install the ray extra (pip install -e '.[ray]')" in err
    assert not (tmp_path / "r.db").exists()


# ---- on a two-node local cluster -------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    nodes.add_node(num_cpus=2)
    nodes.wait_for_nodes()
    yield nodes
    import ray

    ray.shutdown()
    nodes.shutdown()


@pytest.fixture(scope="module")
def ray_pool(h32, cluster):
    from lactchain.models.ray_replicas import RayReplicaPool
    from lactchain.models.vllm_engine import VLLMActor

    t0 = time.perf_counter()
    pool = VLLMActor.load(str(h32), device="cpu", dtype="float32", data_parallel_size=2,
                          ray_address=cluster.address)
    print(f"2 Ray replicas started in {time.perf_counter() - t0:.1f} s")
    assert isinstance(pool, RayReplicaPool)
    yield pool
    pool.close()


def _engine_processes() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "ray::_EngineActor"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@needs_ray
def test_two_ray_replicas_on_two_nodes_answer_exactly_like_one_engine(ray_pool, vllm_h32):
    prompts = _prompts(16)
    described = ray_pool.describe()
    assert len({r["node"] for r in described["replicas"]}) == 2  # one replica on each node
    assert described["ray"]["namespace"].startswith("lactchain-")
    one, two = vllm_h32.generate(prompts), ray_pool.generate(prompts)  # greedy, fp32, constrained
    assert [s.token_ids for s in two] == [s.token_ids for s in one] and [s.moves for s in two] == [s.moves for s in one]
    one = vllm_h32.generate(prompts, temperature=1.0, seed=5, num_samples=2)
    two = ray_pool.generate(prompts, temperature=1.0, seed=5, num_samples=2)
    assert [s.token_ids for s in two] == [s.token_ids for s in one]
    comps = [s.token_ids for s in two[::2]]
    assert ray_pool.completion_logprobs(prompts, comps) == pytest.approx(
        vllm_h32.completion_logprobs(prompts, comps), abs=1e-5)
    long = "move forward " * 2000  # longer than the context: replica 1's error, raised here as one engine's
    with pytest.raises(Exception) as single:
        vllm_h32.generate([long])
    with pytest.raises(type(single.value)) as err:
        ray_pool.generate(_prompts(1) + [long])
    assert str(err.value) == str(single.value)
    assert len(ray_pool.generate(_prompts(2))) == 2  # still serving


@needs_ray
def test_an_adapter_reaches_the_replica_on_the_other_node(ray_pool, vllm_h32, trained_adapter):
    adapter_reaches_both_halves(ray_pool, vllm_h32, trained_adapter)  # the far replica merges its own copy


@needs_ray
@pytest.mark.parametrize("how", ["runs kill"])  # "kill -9" (Ray ends a dead driver's actors) passes too; left out for CI time
def test_a_stopped_replicated_job_leaves_no_actor_and_no_engine(ray_pool, cluster, h32, tmp_path, how):
    """A detached play on 2 Ray replicas: `runs kill` (its close) or kill -9 of the job (Ray
    ends the actors of a dead driver): within 10 s no actor of its namespace is left and
    the engine processes are back to what they were (the module's pool)."""
    import ray

    from cli_helpers import wait_until
    from lactchain.runs.registry import Registry

    before = set(_engine_processes())
    db = tmp_path / "r.db"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("LACTCHAIN_RUN_ID", None)
    launched = subprocess.run([sys.executable, "-m", "lactchain.cli", "play", "--actor", str(h32), "--engine", "vllm",
                               "--dtype", "float32", "--data-parallel-size", "2", "--ray-address", cluster.address,
                               "--episodes", "100000", "--envs", "4", "--db", str(db), "--detach", "--json"],
                              capture_output=True, text=True, env=env, timeout=120)
    assert launched.returncode == 0, launched.stderr
    run_id = json.loads(launched.stdout)["run_id"]
    reg = Registry(db)
    namespace = f"lactchain-{run_id}"

    def mine():
        return [a for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == namespace]

    try:
        wait_until(lambda: len(reg.steps(run_id=run_id)) > 0, timeout=300)  # generating on its replicas
        assert len(mine()) == 2 and len(set(_engine_processes()) - before) == 2
        shown = subprocess.run([sys.executable, "-m", "lactchain.cli", "runs", "show", run_id, "--db", str(db)],
                               capture_output=True, text=True, timeout=120, env={**env, "COLUMNS": "200"})
        assert "replicas" in shown.stdout and namespace in shown.stdout, shown.stdout
    finally:
        run = reg.get_run(run_id)
        if how == "runs kill":
            subprocess.run([sys.executable, "-m", "lactchain.cli", "runs", "kill", run_id, "--db", str(db)],
                           capture_output=True, timeout=120)
        else:
            os.killpg(run["pgid"], signal.SIGKILL)
        t0 = time.time()
        wait_until(lambda: not mine() and not set(_engine_processes()) - before, timeout=60)
        took = time.time() - t0
    assert took < 10, f"actors and engines were gone only after {took:.1f} s"
    if how == "runs kill":
        wait_until(lambda: reg.get_run(run_id)["status"] != "RUNNING", timeout=60)
        assert reg.get_run(run_id)["status"] == "KILLED"


@needs_ray
@pytest.mark.parametrize("command", ["play"])  # evaluate on Ray replicas: the pipeline test below
def test_play_and_evaluate_on_two_ray_replicas_record_one_engines_answers(ray_pool, cluster, h32, tmp_path, capsys,
                                                                         command):
    """The same job on one engine and on 2 Ray replicas (fp32; play seeded and sampled):
    the very same completions, rewards and results."""
    from cli_helpers import run_cli
    from lactchain.runs.registry import Registry

    db = tmp_path / "r.db"
    args = [command, "--actor", str(h32), "--engine", "vllm", "--dtype", "float32", "--max-actions", "3", "--db", db,
            "--json"]
    args += ["--states", "8"] if command == "evaluate" else ["--episodes", "6", "--envs", "3", "--start", "random",
                                                             "--temperature", "1", "--seed", "9"]
    results = []
    for extra in ([], ["--data-parallel-size", "2", "--ray-address", cluster.address]):
        code, out, err = run_cli([*args, *extra], capsys)
        assert code == 0, err[-3000:]
        results.append(json.loads(out))
    with Registry(db) as reg:
        one, two = ([(r["t"], r["completion"], r["reward"]) for r in reg.steps(run_id=res["run_id"])] for res in results)
        assert one and two == one
        assert json.loads(reg.tags(results[1]["run_id"])["replicas"])[0]["namespace"].startswith("lactchain-")
    for key in ("success_rate", "mean_return"):
        if key in results[0]:
            assert results[1][key] == results[0][key], key


@needs_ray
def test_a_pipeline_iteration_collects_and_evaluates_on_ray_replicas(ray_pool, cluster, h32, tmp_path, capsys):
    """One loop iteration with its rollouts on 2 Ray replicas (the actor trains on
    transformers beside them, then the replicas serve its new adapter for the evaluation)."""
    import ray

    from cli_helpers import run_cli
    from lactchain.runs.registry import Registry

    db = tmp_path / "r.db"
    code, out, err = run_cli(["pipeline", "--actor", str(h32), "--critic", "tiny", "--engine", "vllm",
                              "--dtype", "float32", "--data-parallel-size", "2", "--ray-address", cluster.address,
                              "--iterations", "1", "--states", "6", "--samples", "2", "--explore", "4",
                              "--td-rounds", "1", "--td-lists-per-state", "4", "--actor-epochs", "1",
                              "--db", db, "--json"], capsys)
    assert code == 0, err[-3000:]
    result = json.loads(out)
    with Registry(db) as reg:
        params = reg.params(result["run_id"])
        assert params["ray_address"] == cluster.address and params["data_parallel_size"] == 2
        replicas = json.loads(reg.tags(result["run_id"])["replicas"])  # where its rollouts ran
        assert len(replicas) == 2 and len({r["node"] for r in replicas}) == 2
        assert {r["namespace"] for r in replicas} == {f"lactchain-{result['run_id']}"}
        phases = {r["kind"] for r in reg.list_runs(parent_id=result["run_id"])}
        assert {"pairs", "eval", "actor"} <= phases
        evals = [r for r in reg.list_runs(parent_id=result["run_id"]) if r["kind"] == "eval"]
        assert len(evals) == 2 and all(len(reg.steps(run_id=r["id"])) >= 6 for r in evals)  # before and after
    # the loop's replicas are gone with it (the module's pool is all that is left)
    namespaces = {a["namespace"] for a in ray.util.list_named_actors(all_namespaces=True)}
    assert f"lactchain-{result['run_id']}" not in namespaces


@needs_ray
def test_bench_replicas_prints_its_json(h32, tmp_path):
    """`lactchain bench replicas` (its own one-node cluster) on the tiny model: the Ray
    actors answer as the in-process engine (a second pool opens after the first closed), and the JSON carries the
    overhead against its target; the run is recorded like any job's."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", "lactchain.cli", "bench", "replicas", "--actor", str(h32),
                           "--dtype", "float32", "--calls", "1", "--prompts", "4", "--setups", "ray-1,ray-2",
                           "--db", str(tmp_path / "r.db"), "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    # the test's choice (by default all four); ray-2 starts after ray-1 closed, in the same namespace
    assert set(result["setups"]) == {"in-process", "ray-1", "ray-2"}
    assert result["same_answers"] is True and result["ray_overhead_target_pct"] == 10.0
    assert isinstance(result["ray_overhead_pct"], float)
    assert all(row["env_steps_per_s"] > 0 for row in result["setups"].values())
    from lactchain.runs.registry import Registry

    with Registry(tmp_path / "r.db") as reg:  # a recorded bench run: its report and each set-up's median
        run = reg.get_run(result["run_id"])
        assert run["kind"] == "bench" and run["status"] == "FINISHED"
        assert reg.latest_artifact(run["id"], "report")["path"] == result["report"]
        assert [r["value"] for r in reg.metric_history(run["id"], "ray-2/median_s")] == [
            result["setups"]["ray-2"]["median_s"]]
