"""The generation engine of a job: the settings (`lactchain.engine.EngineConfig`, a config
part with --engine/--dtype/--tensor-parallel-size/--data-parallel-size) checked before
the run exists (`choose`), and the loader every generating job uses (`actor_for_job`,
`load_actor`: the library's `load_generator_for` with a spinner)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from lactchain.config import ConfigError
from lactchain.engine import EngineConfig, load_generator_for, record_generation, record_replicas, resolve_auto
from lactchain.envs.catalog import DEFAULT_ENV, actor_moves
from lactchain.jobs.checks import resolve_adapter
from lactchain.jobs.output import err_console
from lactchain.moves import DEFAULT_MOVES, LIST_MAX_MOVES, check_enumerable
from lactchain.runs.lifecycle import Cancelled

def check_engine(engine: str, actor: str | None = None) -> str:
    """The engine that will run ('hf' or 'vllm'; auto decided), or a ConfigError when
    --engine names nothing usable (vllm not installed, a model vLLM cannot run). --dtype
    is the engine config's own check (`lactchain.machine.resolve_dtype`)."""
    from lactchain.models.vllm_engine import EngineUnavailable, check_model_spec, require_vllm, resolve_engine

    try:
        which = resolve_engine(engine, model=actor)
        if which == "vllm":
            require_vllm()
            if actor is not None and engine == "vllm":
                check_model_spec(actor)
    except (ValueError, EngineUnavailable, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from None
    return which


def check_parallel(engine: str, tensor_parallel_size: int = 1, data_parallel_size: int = 1) -> None:
    """Replicas x tensor-parallel ranks must fit this machine (GPUs on CUDA, cores on a
    CPU), and --data-parallel-size needs vllm. No vLLM needed to refuse."""
    if tensor_parallel_size == 1 and data_parallel_size == 1:
        return
    if (engine or "hf").lower() == "hf":
        if data_parallel_size != 1:
            raise ConfigError(f"--data-parallel-size {data_parallel_size} runs vLLM engine replicas: use it with "
                              "--engine vllm, not hf")
        return  # --tensor-parallel-size means nothing to the hf engine (ignored, as before)
    from lactchain.models.vllm_engine import EngineSettings
    from lactchain.models.vllm_replicas import check_capacity

    try:
        check_capacity(EngineSettings(tensor_parallel_size=tensor_parallel_size, data_parallel_size=data_parallel_size))
    except ValueError as exc:
        raise ConfigError(f"{exc}: lower --data-parallel-size / --tensor-parallel-size") from None


def check_engine_adapter(engine: str, adapter_path: str | None, settings: EngineConfig) -> None:
    """An adapter the vllm engine cannot serve."""
    if engine != "vllm" or not adapter_path:
        return
    from lactchain.models.vllm_engine import AdapterNotServable, EngineSettings, check_adapter

    try:
        check_adapter(adapter_path, EngineSettings(tensor_parallel_size=settings.tensor_parallel_size,
                                                   data_parallel_size=settings.data_parallel_size))
    except (AdapterNotServable, FileNotFoundError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def choose(settings: EngineConfig, actor: str, env: str = DEFAULT_ENV) -> EngineConfig:
    """The settings checked before any run exists (no registry needed), with auto
    resolved to the engine that runs; the adapter is `check_engine_adapter`'s."""
    if settings.grammar_spelling == "canonical":  # the env's move lists few enough to enumerate
        try:
            check_enumerable(actor_moves(env).get("moves", DEFAULT_MOVES), LIST_MAX_MOVES)
        except ValueError as exc:
            raise ConfigError(f"--grammar-spelling canonical with --env {env}: {exc}") from None
    named = (settings.engine or "hf").lower()
    tp, dp = settings.tensor_parallel_size, settings.data_parallel_size
    on_this_machine = not settings.ray_address  # a Ray cluster places the replicas: its capacity, not ours
    if named in ("hf", "vllm") and on_this_machine:  # before vLLM is looked for: the refusal needs no vLLM
        check_parallel(named, tp, dp)
    check_engine(settings.engine, actor)
    chosen = resolve_auto(settings, actor)
    if named == "auto" and on_this_machine:
        check_parallel(chosen.engine, tp, dp)
    return chosen


def precheck_engine(config: Any) -> None:
    """A generating job's engine (installed, able to run its actor), checked before the
    registry is opened, auto resolved to the engine that will run: the one the params
    and the saved config record. `config` has an `engine` part and a `model` part."""
    world = getattr(config, "world", None)
    check_spelling(config)
    config.engine = choose(config.engine, config.model.actor, world.env if world is not None else DEFAULT_ENV)


def check_spelling(config: Any) -> None:
    """--grammar-spelling shapes constrained decoding only: with --free it would be a
    setting the run records and never used."""
    if getattr(config, "constrained", True) is False and config.engine.grammar_spelling != "any":
        raise ConfigError(f"--grammar-spelling {config.engine.grammar_spelling} shapes grammar-constrained decoding, "
                          "which --free turns off: drop one of them")


def prepare_engine(registry: Any, config: Any) -> dict[str, Any]:
    """What `precheck_engine` could not check without the registry: an adapter run the
    engine must serve."""
    check_engine_adapter(config.engine.engine, resolve_adapter(registry, config.model.adapter), config.engine)
    return config.engine.params()


def load_actor(actor: str, adapter: str | None, registry: Any, *, quiet: bool = False, env: str = DEFAULT_ENV,
               settings: EngineConfig | None = None, handle: Any = None, extra: dict[str, Any] | None = None,
               progress: Callable[[str, float | None], None] | None = None) -> Any:
    """A transformers `Actor` (engine hf) or a `VLLMActor` (engine vllm, a pool of replicas
    when data_parallel_size > 1), with a status spinner on stderr; a vLLM engine is shut
    down when the job is cancelled and at exit. `extra`: more vLLM engine settings (a
    benchmark's prefix_caching, adapter_mode, max_lora_rank). `progress`: report loading
    steps to the caller instead (the console: nothing may draw on its terminal)."""
    adapter_path = resolve_adapter(registry, adapter) if registry is not None else adapter
    if progress is not None:
        model = load_generator_for(actor, adapter_path, env, settings, progress=progress, extra=extra)
    else:
        with err_console.status(f"loading actor {actor}" + (f" + adapter {adapter}" if adapter else ""),
                                spinner="dots") as status:
            def spin(step: str, fraction: float | None = None) -> None:
                if not quiet:
                    status.update(f"{step}" + (f" {fraction:.0%}" if fraction is not None else ""))

            model = load_generator_for(actor, adapter_path, env, settings, progress=spin, extra=extra)
    if handle is not None and hasattr(model, "close"):
        handle.on_cancel(model.close)
    if handle is not None:
        record_replicas(handle.registry, handle.run_id, model)
        record_generation(handle.registry, handle.run_id, model)
    return model


@contextmanager
def actor_for_job(actor: str, adapter: str | None, handle: Any, settings: EngineConfig, *, quiet: bool = False,
                  env: str = DEFAULT_ENV) -> Iterator[Any]:
    """The job's actor on its engine, closed when the job ends (a vLLM engine never outlives
    it). An engine error after a kill signal ends the run KILLED, not FAILED: `runs kill`
    signals the whole group, so the engine may stop before generate returns."""
    model = load_actor(actor, adapter, handle.registry, quiet=quiet, env=env, settings=settings, handle=handle)
    try:
        yield model
    except Exception as exc:
        if handle.cancelled.is_set():
            raise Cancelled(f"stopped by a termination signal ({type(exc).__name__})") from exc
        raise
    finally:
        if hasattr(model, "close"):
            model.close()
