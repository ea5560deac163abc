"""vLLM engine replicas as Ray actors: `RayReplicaPool`, `ReplicaPool`'s contract on a Ray cluster.

The pool logic (shards with the per-row seeds one engine would use, answers gathered in
prompt order, an error or a dead replica raised to the caller, one merged adapter) is
`vllm_replicas.ReplicaPool`'s; only the transport differs. Each replica is one Ray actor
(`_EngineActor`) holding one `VLLMEngine`:
- placement: Ray spreads the replicas over the nodes with their resources free: `num_gpus` = its
  tensor-parallel size on GPUs (Ray sets CUDA_VISIBLE_DEVICES), `num_cpus` = its cores
  on a CPU (`EngineSettings.cpu_threads`, else 1; torch threads set to match);
- names: every actor of a job lives in its own namespace, `lactchain-<run id>` (the
  job's run, from $LACTCHAIN_RUN_ID; else `lactchain-pid<pid>`), named `replica-<r>`, so
  what a run left on a cluster can be listed and removed by name;
- lifecycle: actors are owned by the job's driver (not detached): Ray ends them when the
  driver ends, however it ends (kill -9 included). `close()` (the job's end, `runs kill`)
  asks each engine to shut down, then `ray.kill`s the actor, then disconnects the driver;
- adapters: replicas on the driver's node reload one copy merged by replica 0 (as the
  local pool); a replica on another node gets the adapter's files through Ray's object
  store and merges its own copy there (no shared file system needed for adapters);
- the model itself is read from the same path on every node (prepare it on each node,
  or share the models folder).

Connecting (`connect`): `--ray-address auto` (the cluster `ray start --head` started on
this machine), `HOST:PORT` (a head node's GCS) or `ray://HOST:PORT` (Ray Client); unset:
$RAY_ADDRESS. `check_address` refuses a malformed or unreachable address in one line
before any run exists; Ray missing is a one-line error naming the extra.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional

from lactchain.models.vllm_replicas import ReplicaDied, ReplicaError, ReplicaPool, one_line
from lactchain.models.vllm_single import EngineSettings, VLLMEngine, check_adapter, merge_adapter

RAY_EXTRA = "pip install -e '.[ray]'"
CONNECT_TIMEOUT_S = 3.0
_ADDRESS = re.compile(r"^(?:ray://)?(?P<host>[A-Za-z0-9.\-_]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


class RayUnavailable(ValueError):
    """--ray-address given where Ray is not installed, or not reachable."""


def ray_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def check_address(address: str | None) -> str | None:
    """The address to connect to (`address`, else $RAY_ADDRESS, else None: no Ray), or a
    RayUnavailable naming what is wrong: Ray not installed, a malformed address, nothing
    listening there, no cluster started on this machine for 'auto'. Cheap: no driver starts."""
    address = (address if address is not None else os.environ.get("RAY_ADDRESS", "")).strip() or None
    if address is None:
        return None
    if not ray_installed():
        raise RayUnavailable(f"--ray-address {address}: Ray is not installed here; install the ray extra "
                             f"({RAY_EXTRA})")
    if address == "auto":
        from ray._private.services import find_gcs_addresses  # the clusters `ray start` left on this machine

        if not find_gcs_addresses():
            raise RayUnavailable("--ray-address auto: no Ray cluster was started on this machine; start one "
                                 "(`ray start --head`) or give the head's HOST:PORT")
        return address
    match = _ADDRESS.match(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise RayUnavailable(f"--ray-address {address!r} is not an address: use auto, HOST:PORT (the head node's "
                             "GCS, port 6379 by default) or ray://HOST:PORT")
    host = match["host"].strip("[]")
    try:
        with socket.create_connection((host, int(match["port"])), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayUnavailable(f"--ray-address {address}: nothing answers there ({exc.strerror or exc}); start the "
                             "head node (`ray start --head`) or check the address") from None
    return address


def namespace() -> str:
    """The Ray namespace of this job's actors: one per run."""
    run = os.environ.get("LACTCHAIN_RUN_ID")
    return f"lactchain-{run}" if run else f"lactchain-pid{os.getpid()}"


_DRIVERS = {"pools": 0}  # live pools of this process: the last one closed disconnects the driver
_POOL_SERIALS = itertools.count()  # names actors per pool: a closed pool's actors may still be dying


def connect(address: str) -> None:
    """This process as the driver of the cluster at `address` (once; later pools share it).
    Worker output stays in Ray's logs: a job's stdout carries its --json result."""
    import ray

    if ray.is_initialized():
        return
    main = threading.current_thread() is threading.main_thread()
    ours = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)} if main else {}
    ray.init(address=address, namespace=namespace(), log_to_driver=False, ignore_reinit_error=True,
             configure_logging=False)
    for sig, handler in ours.items():  # Ray's driver exits on SIGTERM: the job's own handler (stop between steps) wins
        if handler is not None:
            signal.signal(sig, handler)


def _disconnect_if_last() -> None:
    import ray

    _DRIVERS["pools"] = max(0, _DRIVERS["pools"] - 1)
    if _DRIVERS["pools"] == 0 and ray.is_initialized():
        ray.shutdown()


class _EngineActor:
    """One replica on a Ray worker: a `VLLMEngine` and the operations the pool sends."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import time

        import ray

        os.environ.update(spec["env"])
        if spec.get("threads"):
            import torch

            torch.set_num_threads(int(spec["threads"]))  # before the engine (vLLM-CPU freezes it after)
        self._tmp = Path(tempfile.mkdtemp(prefix="lactchain-ray-replica-"))
        t0 = time.perf_counter()
        self.engine = VLLMEngine(spec["folder"], name=spec["name"], moves=spec["moves"], max_moves=spec["max_moves"],
                                 settings=spec["settings"], device=spec["device"], replica=spec["replica"])
        self._info = {"pid": os.getpid(), "startup_seconds": time.perf_counter() - t0,
                      "node": ray.get_runtime_context().get_node_id()}

    def info(self) -> dict[str, Any]:
        import torch

        return {**self._info, "torch_threads": torch.get_num_threads()}

    def call(self, op: str, args: tuple, kwargs: dict) -> Any:
        if op == "merge":
            return str(merge_adapter(self.engine.folder, *args, **kwargs))
        if op == "load_adapter_files":  # an adapter from another node: write it here, merge here
            name, files = args
            folder = self._tmp / "adapters" / name
            shutil.rmtree(folder, ignore_errors=True)
            for rel, data in files.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(data)
            return self.engine.load_adapter(folder)
        if op not in ("generate", "completion_logprobs", "choice_logprobs", "load_adapter", "unload_adapter"):
            raise ValueError(f"unknown replica operation {op!r}")
        return getattr(self.engine, op)(*args, **kwargs)

    def close(self) -> None:
        try:
            self.engine.close()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)


class _RayWorker:
    """`vllm_replicas._Worker`'s methods over a Ray actor."""

    def __init__(self, replica: int, actor: Any, devices: list[int]) -> None:
        self.replica, self.actor, self.devices = replica, actor, devices
        self.pid: Optional[int] = None
        self.startup_seconds = 0.0
        self.torch_threads: Optional[int] = None
        self.node: Optional[str] = None
        self._pending: Any = actor.info.remote()  # its first answer: where and how it started
        self._stopping: Any = None

    def send(self, op: str, args: tuple, kwargs: dict) -> None:
        self._pending = self.actor.call.remote(op, args, kwargs)

    def recv(self) -> Any:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return ray.get(self._pending)
        except RayActorError as exc:
            raise ReplicaDied(f"replica {self.replica} (pid {self.pid}) ended unexpectedly: "
                              f"{one_line(exc, 300)}") from None
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if cause is not None and "\n" not in str(cause).strip():
                raise cause from None
            raise ReplicaError(f"replica {self.replica}: {one_line(cause or exc)}") from None

    def stop(self) -> None:
        try:
            self._stopping = self.actor.close.remote()
        except Exception:
            self._stopping = None

    def wait(self, timeout: float) -> None:
        import ray

        if self._stopping is not None:
            try:
                ray.wait([self._stopping], timeout=max(timeout, 0.0))
            except Exception:
                pass

    def kill(self) -> None:
        import ray

        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # already gone
            pass


class RayReplicaPool(ReplicaPool):
    """`ReplicaPool` whose replicas are Ray actors on the cluster at `ray_address`."""

    def __init__(self, folder: str | Path, *, ray_address: str, **kw: Any) -> None:
        import ray

        connect(ray_address)
        _DRIVERS["pools"] += 1
        self._driver_node = ray.get_runtime_context().get_node_id()
        self._ray_open = True
        super().__init__(folder, **kw)

    def _start_workers(self, local: EngineSettings, *, limit_threads: bool, pin: bool) -> list[Any]:
        import ray

        tp = self.settings.tensor_parallel_size
        cpus = self.settings.cpu_threads or 1
        need = {"GPU": tp} if self.device != "cpu" else {"CPU": cpus}
        have = ray.cluster_resources()
        for res, each in need.items():
            if have.get(res, 0) < each * self.settings.data_parallel_size:
                raise ValueError(f"{self.settings.data_parallel_size} engine replicas x {each} {res} need "
                                 f"{each * self.settings.data_parallel_size} {res} on the Ray cluster; it has "
                                 f"{have.get(res, 0):g}: lower --data-parallel-size or add nodes")
        remote = ray.remote(_EngineActor)
        options = {"num_gpus": tp, "num_cpus": 1} if self.device != "cpu" else {"num_cpus": cpus}
        env = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
        if self.device == "cpu":
            env["OMP_NUM_THREADS"] = str(cpus)
        workers, serial = [], next(_POOL_SERIALS)
        for r in range(self.settings.data_parallel_size):
            spec = dict(folder=str(self.folder), name=f"{self.name} (replica {r})", moves=self.moves,
                        max_moves=self.max_moves, settings=local, device=self.device, replica=r, env=env,
                        threads=cpus if self.device == "cpu" and limit_threads else None)
            actor = remote.options(name=f"pool-{serial}-replica-{r}", namespace=namespace(), max_restarts=0,
                                   scheduling_strategy="SPREAD", **options).remote(spec)
            workers.append(_RayWorker(r, actor, []))
            self._workers = workers  # a failure part way closes the ones started
        return workers

    def load_adapter(self, path: str | Path) -> None:
        """As `ReplicaPool.load_adapter` when every replica shares the driver's node (one
        merged copy); otherwise each replica off this node receives the adapter's files
        and merges its own copy."""
        if all(w.node == self._driver_node for w in self._workers):
            return super().load_adapter(path)

        path = Path(path).expanduser()
        check_adapter(path, self.settings)
        files = {str(f.relative_to(path)): f.read_bytes() for f in path.rglob("*") if f.is_file()}
        with self._lock:
            self._call([(w.replica, "load_adapter_files", (path.name or "adapter", files), {})
                        for w in self._workers])
            self.adapter = path

    def close(self) -> None:
        super().close()
        if getattr(self, "_ray_open", False):
            self._ray_open = False
            _disconnect_if_last()

    def describe(self) -> dict[str, Any]:
        import ray

        out = super().describe()
        out["ray"] = {"namespace": namespace(), "address": ray.get_runtime_context().gcs_address
                      if ray.is_initialized() else None}
        return out
