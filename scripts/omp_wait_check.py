"""How torch's OpenMP threads wait, measured: one command timed under each wait policy,
on an idle machine and beside a busy torch process (a detached job, say), side by side.

torch's CPU wheels use GNU OpenMP, whose threads spin ~3 ms at every barrier before they
sleep (libgomp's default when OMP_WAIT_POLICY is unset; GOMP_SPINCOUNT=300000). Alone on
the machine that is free; beside another busy process the spinning threads take the cores
the other needs, and both slow down many times over. lactchain's entry points set
GOMP_SPINCOUNT=10000 (a ~0.1 ms spin) unless the user set a policy
(`lactchain.machine.calm_omp_threads`); this script is the measurement behind that default.

    python scripts/omp_wait_check.py [--repeats 2] [--arms spin,passive] [--load-threads N] -- COMMAND ...

Arms: `spin` (libgomp's default, what ran before), `passive` (sleep at once), `spin_10k`
(lactchain's default), `spin_50k`, `one_thread` (spin, one thread). Each arm runs COMMAND
idle, then beside a load process that runs the same arm's environment (both processes are
lactchain under that policy): a torch MLP trained step after step, whose steps/s is
reported too; and the load alone for 5 s (what the arm costs a job alone). Prints one JSON
object: per arm and condition, the command's wall seconds (each repeat) and the load's
steps/s. Run it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARMS = {
    "spin": {"GOMP_SPINCOUNT": "300000"},  # libgomp's own default, set so lactchain leaves it
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spin_10k": {"GOMP_SPINCOUNT": "10000"},  # ~0.1 ms of spinning, then sleep: lactchain's default
    "spin_50k": {"GOMP_SPINCOUNT": "50000"},  # ~0.5 ms
    "one_thread": {"GOMP_SPINCOUNT": "300000", "OMP_NUM_THREADS": "1"},
}
POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "KMP_BLOCKTIME")

LOAD = r"""
import os, sys, time, torch
stop = sys.argv[1]  # the load stops when this file appears (a signal could land inside a torch op)
net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
x = torch.randn(64, 256)
print("ready", flush=True)
steps, t0 = 0, time.perf_counter()
while not os.path.exists(stop):
    loss = net(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    steps += 1
print(steps / (time.perf_counter() - t0), flush=True)
"""


def _env(arm: dict[str, str], load_threads: int | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in POLICY_VARS}
    env.update(arm)
    if load_threads is not None and "OMP_NUM_THREADS" not in arm:
        env["OMP_NUM_THREADS"] = str(load_threads)
    return env


def _timed(command: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return round(time.perf_counter() - t0, 2)


@contextlib.contextmanager
def _load(arm: dict[str, str], load_threads: int):
    """A load process running while the block runs; yields a list that gets its steps/s."""
    with tempfile.TemporaryDirectory() as folder:
        stop = Path(folder) / "stop"
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(stop)], env=_env(arm, load_threads),
                                stdout=subprocess.PIPE, text=True)
        assert load.stdout is not None
        if load.stdout.readline().strip() != "ready":  # torch imported, the loop about to start
            load.kill()
            sys.exit(f"the load process ended before it started (exit {load.wait()}): run it alone to see why")
        rate: list[float] = []
        try:
            yield rate
        finally:
            stop.touch()
            try:
                out, _ = load.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                load.kill()
                sys.exit("the load process did not stop within 120 s of its stop file; killed it")
        lines = out.strip().splitlines()
        if load.returncode != 0 or not lines:
            sys.exit(f"the load process failed (exit {load.returncode}) before it reported its steps/s")
        rate.append(round(float(lines[-1]), 1))


def _beside_load(command: list[str], arm: dict[str, str], load_threads: int) -> tuple[float, float]:
    """The command's wall seconds beside the load, and the load's steps/s meanwhile."""
    with _load(arm, load_threads) as rate:
        seconds = _timed(command, _env(arm))
    return seconds, rate[0]


def _load_alone(arm: dict[str, str], load_threads: int, seconds: float = 5.0) -> float:
    """The load's steps/s with nothing beside it (what the arm costs a job alone)."""
    with _load(arm, load_threads) as rate:
        time.sleep(seconds)
    return rate[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--load-threads", type=int, default=os.cpu_count() or 1,
                        help="torch threads of the load process (default: every core, as a job takes)")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to time after --")
    arms = [a.strip() for a in args.arms.split(",")]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"--arms: unknown {', '.join(unknown)}; choose from {', '.join(ARMS)}")
    out: dict = {"command": command, "cores": os.cpu_count(), "load_threads": args.load_threads,
                 "arms": {a: {"idle_s": [], "beside_load_s": [], "load_steps_per_s": [],
                                     "load_alone_steps_per_s": []} for a in arms}}
    for _ in range(args.repeats):  # arms interleaved: drift on the machine hits each alike
        for arm in arms:
            row = out["arms"][arm]
            row["idle_s"].append(_timed(command, _env(ARMS[arm])))
            seconds, rate = _beside_load(command, ARMS[arm], args.load_threads)
            row["beside_load_s"].append(seconds)
            row["load_steps_per_s"].append(rate)
            row["load_alone_steps_per_s"].append(_load_alone(ARMS[arm], args.load_threads))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
