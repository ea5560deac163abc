"""torch's OpenMP threads spin only briefly at barriers in lactchain's processes unless the
user chose how they wait: beside a busy training process, libgomp's long spin slowed a
greedy evaluation 5x, the short spin 2x (scripts/omp_wait_check.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lactchain.machine import OMP_POLICY_VARS, calm_omp_threads, machine_info

SHOW = """
import os, sys
sys.argv = ["lactchain", "--help"]
from lactchain.cli import main
try:
    main()
except SystemExit:
    pass
print("policy:", os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"), os.environ.get("KMP_BLOCKTIME"),
      file=sys.stderr)
"""


def _policy_after_cli(**chosen: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in (*OMP_POLICY_VARS, "KMP_BLOCKTIME")} | chosen
    done = subprocess.run([sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stderr.splitlines() if line.startswith("policy:"))


@pytest.mark.parametrize("chosen, seen", [
    ({}, "policy: None 10000 1"),
    ({"OMP_WAIT_POLICY": "PASSIVE"}, "policy: PASSIVE None None"),
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "policy: ACTIVE None None"),
    ({"GOMP_SPINCOUNT": "300000"}, "policy: None 300000 1"),
    ({"KMP_BLOCKTIME": "200"}, "policy: None 10000 200"),
])
def test_the_cli_shortens_the_omp_spin_unless_the_user_chose(chosen, seen):
    assert _policy_after_cli(**chosen) == seen


def test_the_machine_facts_say_how_threads_waited(monkeypatch):
    for name in (*OMP_POLICY_VARS, "KMP_BLOCKTIME"):
        monkeypatch.delenv(name, raising=False)
    calm_omp_threads()
    assert machine_info()["omp_wait"] == "GOMP_SPINCOUNT=10000, KMP_BLOCKTIME=1"
    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert machine_info()["omp_wait"] == "PASSIVE"


def test_the_entry_points_set_the_policy_before_torch_loads():
    """libgomp reads the policy once, when torch loads: importing an entry point's module
    (the CLI, the job runner, the console) must not load torch before its main() sets it."""
    probe = ("import sys, lactchain.cli, lactchain.jobs.__main__, tui.app; "
             "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
