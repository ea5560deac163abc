"""The generation engine of a job: ONE settings object (`EngineConfig`, a config part
with --engine/--dtype/--tensor-parallel-size/--data-parallel-size), checked before the
run exists (`choose`), and ONE actor loader (`actor_for_job`) used by every
generating job."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from lactchain.config import Config, ConfigError, option
from lactchain.envs.catalog import DEFAULT_ENV
from lactchain.jobs.checks import resolve_adapter
from lactchain.jobs.output import err_console

ENGINE_HELP = ("Generation engine: hf (transformers, the default for now), vllm (needs the vllm extra: "
               "pip install -e '.\\[vllm]'), or auto (vllm when installed, else hf).")


@dataclass
class EngineConfig(Config):
    """Which engine generates, at which dtype, over how many devices."""

    engine: str = option("hf", ENGINE_HELP, suggest=("hf", "vllm", "auto"), check="engine", form="Engine")
    dtype: str | None = option(None, "Generation dtype (float32, bfloat16, float16). Default: hf keeps the loaded "
                                     "weights (float32 on a CPU), vllm runs bfloat16.")
    tensor_parallel_size: int = option(1, "vllm only: GPUs one engine spreads the model over.", min=1, max=64)
    data_parallel_size: int = option(1, "vllm only: engine replicas, prompts sharded across them; each replica "
                                        "takes --tensor-parallel-size devices.", min=1, max=64)

    def check(self) -> None:
        from lactchain.models.vllm_single import ENGINES

        self.engine = str(self.engine).lower()
        if self.engine not in ENGINES:
            self.refuse("engine", f"unknown engine {self.engine!r}; use one of {', '.join(ENGINES)}")

    def record_params(self) -> dict[str, Any]:
        return self.params()

    def params(self) -> dict[str, Any]:
        """What a run records: nothing for the default hf engine (older and hf runs keep
        their params as they were)."""
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


def check_engine(engine: str, dtype: str | None = None, actor: str | None = None) -> str:
    """The engine that will run ('hf' or 'vllm'; auto decided), or a ConfigError when
    --engine / --dtype name nothing usable (vllm not installed, a model vLLM cannot run)."""
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


def choose(settings: EngineConfig, actor: str) -> EngineConfig:
    """The settings checked before any run exists (no registry needed), with auto
    resolved to the engine that runs; the adapter is `check_engine_adapter`'s."""
    named = (settings.engine or "hf").lower()
    tp, dp = settings.tensor_parallel_size, settings.data_parallel_size
    if named in ("hf", "vllm"):  # before vLLM is looked for: the refusal needs no vLLM
        check_parallel(named, tp, dp)
    which = check_engine(settings.engine, settings.dtype, actor)
    if named == "auto":
        if which == "hf" and dp != 1:
            raise ConfigError(f"--data-parallel-size {dp} needs the vllm engine; --engine auto chose hf here")
        check_parallel(which, tp, dp)
    return settings.replace(engine=which)


def precheck_engine(config: Any) -> None:
    """A generating job's engine (installed, able to run its actor), checked before the
    registry is opened, auto resolved to the engine that will run: the one the params
    and the saved config record. `config` has an `engine` part and a `model` part."""
    config.engine = choose(config.engine, config.model.actor)


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
    from lactchain.envs.catalog import actor_moves
    from lactchain.models.vllm_engine import load_generator

    settings = settings or EngineConfig()
    adapter_path = resolve_adapter(registry, adapter) if registry is not None else adapter
    kw = {k: v for k, v in settings.load_kw().items() if v is not None}
    engine = kw.pop("engine", "hf")
    if engine != "vllm":
        kw = {"inference_dtype": kw["dtype"]} if "dtype" in kw else {}
    else:
        kw.update(extra or {})
    kw.update(actor_moves(env))
    if progress is not None:
        model = load_generator(actor, engine, adapter=adapter_path, progress=progress, **kw)
    else:
        with err_console.status(f"loading actor {actor}" + (f" + adapter {adapter}" if adapter else ""),
                                spinner="dots") as status:
            def spin(step: str, fraction: float | None = None) -> None:
                if not quiet:
                    status.update(f"{step}" + (f" {fraction:.0%}" if fraction is not None else ""))

            model = load_generator(actor, engine, adapter=adapter_path, progress=spin, **kw)
    if handle is not None and hasattr(model, "close"):
        handle.on_cancel(model.close)
    return model


@contextmanager
def actor_for_job(actor: str, adapter: str | None, handle: Any, settings: EngineConfig, *, quiet: bool = False,
                  env: str = DEFAULT_ENV) -> Iterator[Any]:
    """The job's actor on its engine, closed when the job ends (a vLLM engine never outlives
    it). An engine error after a kill signal ends the run KILLED, not FAILED: `runs kill`
    signals the whole group, so the engine may stop before generate returns."""
    from lactchain.lifecycle import Cancelled

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
