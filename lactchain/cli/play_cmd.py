"""`lactchain play`: the actor plays episodes (the grid, Blackjack) in batched lock-step."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Iterator, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    DetachOption,
    EnvOption,
    JsonOption,
    LineLog,
    RunIdOption,
    SceneOption,
    StrategyOption,
    console,
    err_console,
    finite,
    resolve_adapter,
    run_job,
    scene_kwargs,
    strategy_of,
)

ActorOption = Annotated[str, typer.Option("--actor", help="Actor preset (tiny, smollm2-135m, mistral-7b-instruct), local path or hub id.")]
AdapterOption = Annotated[
    Optional[str], typer.Option("--adapter", help="LoRA adapter: a train-actor run id or an adapter folder.")
]
ConstrainedOption = Annotated[
    bool,
    typer.Option("--constrained/--free", help="Grammar-constrained move lists (default), or free text + lenient parsing."),
]
EngineOption = Annotated[str, typer.Option(
    "--engine", help="Generation engine: hf (transformers, the default for now), vllm (needs the vllm extra: "
                     "pip install -e '.\\[vllm]'), or auto (vllm when installed, else hf).")]
DtypeOption = Annotated[Optional[str], typer.Option(
    "--dtype", help="Generation dtype (float32, bfloat16, float16). Default: hf keeps the loaded weights "
                    "(float32 on a CPU), vllm runs bfloat16.")]
TensorParallelOption = Annotated[int, typer.Option(
    "--tensor-parallel-size", min=1, max=64, help="vllm only: GPUs one engine spreads the model over.")]
DataParallelOption = Annotated[int, typer.Option(
    "--data-parallel-size", min=1, max=64,
    help="vllm only: engine replicas, prompts sharded across them; each replica takes --tensor-parallel-size devices.")]


def check_engine(engine: str, dtype: Optional[str] = None, actor: Optional[str] = None) -> str:
    """Fail (one line) before any run exists when --engine / --dtype name nothing usable
    (vllm not installed, a model vLLM cannot run here); returns the engine that will run
    ('hf' or 'vllm'; auto decided)."""
    from lactchain.cli.common import fail
    from lactchain.models.vllm_engine import EngineUnavailable, check_model_spec, require_vllm, resolve_engine

    try:
        which = resolve_engine(engine, model=actor)
        if which == "vllm":
            require_vllm()
            if actor is not None and engine == "vllm":
                check_model_spec(actor)
        if dtype is not None:
            from lactchain.models.actor import _as_dtype

            _as_dtype(dtype)
    except (ValueError, EngineUnavailable, FileNotFoundError) as exc:
        fail(str(exc))
    return which


def check_engine_adapter(engine: str, adapter: Optional[str], db: Any, **settings: Any) -> None:
    """Fail (one line) before any run exists for an adapter the vllm engine cannot serve."""
    if engine != "vllm" or not adapter:
        return
    from lactchain.cli.common import fail, open_registry
    from lactchain.models.vllm_engine import AdapterNotServable, EngineSettings, check_adapter

    with open_registry(db) as registry:
        path = resolve_adapter(registry, adapter)
    try:
        check_adapter(path, EngineSettings(**settings))
    except (AdapterNotServable, FileNotFoundError, ValueError) as exc:
        fail(str(exc))


@dataclass
class EngineChoice:
    """The generation engine of one job, checked before its run exists (`choose_engine`)."""

    engine: str = "hf"  # 'hf' or 'vllm' (auto decided)
    dtype: Optional[str] = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1

    def params(self) -> dict[str, Any]:
        """What the run's params record: nothing for the default hf engine, so older and hf
        runs keep their params as they were."""
        if self.engine == "hf" and self.dtype is None:
            return {}
        out: dict[str, Any] = {"engine": self.engine, "dtype": self.dtype}
        if self.tensor_parallel_size != 1:
            out["tensor_parallel_size"] = self.tensor_parallel_size
        if self.data_parallel_size != 1:
            out["data_parallel_size"] = self.data_parallel_size
        return out

    def load_kw(self) -> dict[str, Any]:
        vllm = self.engine == "vllm"
        return {"engine": self.engine, "dtype": self.dtype,
                "tensor_parallel_size": self.tensor_parallel_size if vllm else None,
                "data_parallel_size": self.data_parallel_size if vllm else None}


def check_parallel(engine: str, tensor_parallel_size: int = 1, data_parallel_size: int = 1) -> None:
    """Fail (one line) before any run exists when replicas x tensor-parallel ranks need more
    devices than this machine has (GPUs on CUDA, cores on a CPU: one each at least) or
    --data-parallel-size comes with the hf engine. No vLLM needed."""
    if tensor_parallel_size == 1 and data_parallel_size == 1:
        return
    from lactchain.cli.common import fail

    if (engine or "hf").lower() == "hf":
        if data_parallel_size != 1:
            fail(f"--data-parallel-size {data_parallel_size} runs vLLM engine replicas: use it with --engine vllm, "
                 "not hf")
        return  # --tensor-parallel-size means nothing to the hf engine (ignored, as before)
    from lactchain.models.vllm_engine import EngineSettings
    from lactchain.models.vllm_replicas import check_capacity

    try:
        check_capacity(EngineSettings(tensor_parallel_size=tensor_parallel_size,
                                      data_parallel_size=data_parallel_size))
    except ValueError as exc:
        fail(f"{exc}: lower --data-parallel-size / --tensor-parallel-size")


def choose_engine(engine: str, dtype: Optional[str], actor: str, adapter: Optional[str], db: Any,
                  tensor_parallel_size: int = 1, data_parallel_size: int = 1) -> EngineChoice:
    """--engine / --dtype / --tensor-parallel-size / --data-parallel-size checked (one
    line, before any run)."""
    named = (engine or "hf").lower()
    if named in ("hf", "vllm"):  # before vLLM is looked for: the refusal needs no vLLM
        check_parallel(named, tensor_parallel_size, data_parallel_size)
    which = check_engine(engine, dtype, actor)
    if named == "auto":
        if which == "hf" and data_parallel_size != 1:
            from lactchain.cli.common import fail

            fail(f"--data-parallel-size {data_parallel_size} needs the vllm engine; --engine auto chose hf here")
        check_parallel(which, tensor_parallel_size, data_parallel_size)
    check_engine_adapter(which, adapter, db, tensor_parallel_size=tensor_parallel_size,
                         data_parallel_size=data_parallel_size)
    return EngineChoice(which, dtype, tensor_parallel_size, data_parallel_size)


@contextmanager
def actor_for_job(actor: str, adapter: Optional[str], handle: Any, choice: EngineChoice, *, quiet: bool = False,
                  env: str = "grid") -> Iterator[Any]:
    """The job's actor on its engine, closed when the job ends (a vLLM engine never outlives
    it). An engine error after a kill signal ends the run KILLED, not FAILED: `runs kill`
    signals the whole group, so the engine may stop before generate returns."""
    model = load_actor(actor, adapter, handle.registry, quiet=quiet, env=env, handle=handle, **choice.load_kw())
    try:
        yield model
    except Exception as exc:
        if handle.cancelled.is_set():
            from lactchain.jobs import Cancelled

            raise Cancelled(f"stopped by a termination signal ({type(exc).__name__})") from exc
        raise
    finally:
        if hasattr(model, "close"):
            model.close()


def load_actor(actor: str, adapter: Optional[str], registry: Any, quiet: bool = False, env: str = "grid",
               engine: str = "hf", handle: Any = None, **engine_kw: Any):
    """Load an actor with a status spinner on stderr (model loads take seconds): a
    transformers `Actor` (engine hf) or a `VLLMActor` (engine vllm; `engine_kw`: its
    EngineSettings, e.g. dtype, tensor_parallel_size, data_parallel_size: a pool of engine
    replicas when > 1). A vLLM engine (or replica pool) is shut down when
    the job is cancelled and at exit."""
    from lactchain.envs.catalog import actor_moves
    from lactchain.models.vllm_engine import load_generator

    adapter_path = resolve_adapter(registry, adapter)
    with err_console.status(f"loading actor {actor}" + (f" + adapter {adapter}" if adapter else ""), spinner="dots") as status:
        def progress(step: str, fraction: float | None = None) -> None:
            if not quiet:
                status.update(f"{step}" + (f" {fraction:.0%}" if fraction is not None else ""))

        kw = {k: v for k, v in engine_kw.items() if v is not None}
        if engine != "vllm":
            kw = {"inference_dtype": kw["dtype"]} if "dtype" in kw else {}
        model = load_generator(actor, engine, adapter=adapter_path, progress=progress, **kw, **actor_moves(env))
    if handle is not None and hasattr(model, "close"):
        handle.on_cancel(model.close)
    return model


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"play {result['run_id']}", show_header=False)
    for key in ("episodes", "success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate",
                "lenient_parse_rate", "env_steps_per_s"):
        value = result[key]
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)


def play(
    ctx: typer.Context,
    actor: ActorOption = "smollm2-135m",
    adapter: AdapterOption = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, max=10_000_000, help="Episodes to play.")] = 8,
    envs: Annotated[int, typer.Option("--envs", "-b", min=1, max=4096, help="Envs stepped in lock-step (the generate batch size).")] = 8,
    constrained: ConstrainedOption = True,
    start: Annotated[str, typer.Option("--start", help="Start state: 'fixed' (the grid's (0,0) east; Blackjack: the hand the seed deals) or 'random' (uniform over the env's start states).")] = "fixed",
    temperature: Annotated[float, typer.Option("--temperature", "-t", callback=finite, min=0.0, help="Sampling temperature; 0 = greedy.")] = 0.0,
    max_actions: Annotated[int, typer.Option("--max-actions", min=1, max=1000, help="Actions per episode before truncation.")] = 10,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for start states and sampling.")] = 0,
    engine: EngineOption = "hf",
    dtype: DtypeOption = None,
    tensor_parallel_size: TensorParallelOption = 1,
    data_parallel_size: DataParallelOption = 1,
    strategy: StrategyOption = None,
    env: EnvOption = "grid",
    scene: SceneOption = None,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Play episodes with an LLM actor and record every step in the registry.

    Each lock-step renders one prompt per live env and makes ONE batched generate
    call. Prints success rate, mean return, optimal ratio (BFS-optimal moves /
    moves used, over successful episodes), parse-failure rate and env-steps/s.
    """
    if start not in ("fixed", "random"):
        raise typer.BadParameter("must be 'fixed' or 'random'", param_hint="--start")
    extra = scene_kwargs(env, scene)
    choice = choose_engine(engine, dtype, actor, adapter, db, tensor_parallel_size, data_parallel_size)
    params = dict(actor=actor, adapter=adapter, episodes=episodes, envs=envs, constrained=constrained, start=start,
                  temperature=temperature, max_actions=max_actions, seed=seed, env=env, **extra, **choice.params())

    def body(handle) -> dict[str, Any]:
        from lactchain.rollout import RolloutConfig, run_rollouts

        from lactchain.envs.catalog import make_env

        cfg = RolloutConfig(episodes=episodes, n_envs=envs, constrained=constrained, temperature=temperature,
                            start=start, seed=seed, env_kwargs={"max_actions": max_actions, **extra}, env=env)
        won, lost = ("won the hand", "did not win") if env == "blackjack" else ("reached the goal",
                                                                                "did not reach the goal")
        with actor_for_job(actor, adapter, handle, choice, quiet=as_json, env=env) as model, \
                Progress(TextColumn("[bold]play"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                         TimeElapsedColumn(), console=err_console, transient=as_json) as bar:
            task = bar.add_task("episodes", total=episodes, stats="")
            wins = 0
            line = LineLog()

            def on_episode(ep) -> None:
                nonlocal wins
                wins += ep.success
                done = bar.tasks[0].completed + 1
                bar.update(task, advance=1, stats=f"success {wins}/{done}")
                handle.log_metrics({"episode_return": ep.total_return, "episode_success": float(ep.success)}, step=ep.idx)
                line(f"episode {done}/{episodes}: return {ep.total_return:.2f}, "
                     f"{won if ep.success else lost}; success {wins}/{done}",
                     force=done in (1, episodes))

            strat = strategy_of(handle, strategy, env)
            line(f"play: {episodes} episodes of {env} on {envs} envs, strategy {strat.label}", force=True)
            summary = run_rollouts(model, cfg, prompt=strat.prompt(model.moves, make_env(env)),
                                   registry=handle.registry, run_id=handle.run_id,
                                   on_episode=on_episode, should_stop=handle.cancelled.is_set)
        result = summary.as_dict()
        handle.log_metrics({k: v for k, v in result.items() if isinstance(v, (int, float))})
        return result

    run_job(ctx, kind="play", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"play {actor}" + (f" {env}" if env != "grid" else ""), render=render_summary)
