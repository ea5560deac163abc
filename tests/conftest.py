"""Shared test setup: offline Hugging Face, prepared models reused across runs, a tiny actor.

Kept small and generic; test modules hold their own specific fixtures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Nothing in the test suite may reach the Hugging Face hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Under pytest-xdist (`-n 2`, the CI's two cores) each worker, and the jobs it starts,
# computes on one thread: two workers x two threads on two cores only spin.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
# Prepared model copies (tiny, the SmolLM2 conversion) live in the repo's runs/models,
# so the one-off conversion is reused across test runs (runs/* is git-ignored).
os.environ.setdefault("LACTCHAIN_MODELS", str(REPO / "runs" / "models"))
# Runs and the registry a test makes without --db go to a folder of this session, never to
# the checkout's runs/registry.db (a user's own registry when the suite runs in their clone).
if "LACTCHAIN_RUNS" not in os.environ:  # set by the first process (xdist's workers inherit it)
    import atexit
    import shutil
    import tempfile

    os.environ["LACTCHAIN_RUNS"] = tempfile.mkdtemp(prefix="lactchain-test-runs-")
    atexit.register(shutil.rmtree, os.environ["LACTCHAIN_RUNS"], True)


@pytest.fixture
def lc(capsys):
    """`lactchain ...` in this process: (exit code, stdout, stderr)."""
    from cli_helpers import run_cli

    return lambda *argv: run_cli([str(a) for a in argv], capsys)


@pytest.fixture(scope="session")
def tiny_actor():
    """The seeded `tiny` actor (DEFAULT_MOVES, max_moves 8). Shared by the session:
    do not change its moves / max_moves or load adapters on it; load your own."""
    from lactchain.models.actor import Actor

    return Actor.load("tiny", device="cpu")


@pytest.fixture(scope="module")
def one_thread():
    """Small models on a shared 2-core box: one intra-op thread beats two spinning threads.
    Modules opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
