"""torch.compile of the actor's training step (lactchain.train.compiled), on the tiny actor.

A compiled step must train exactly as the plain one: the same losses step for step, for
the TRL trainers (CPO-SimPO here) and rft's own loop. The graphs are traced and run with
the "aot_eager" backend, which runs the same captured forward and backward without
generating code (inductor needs a C++ compiler and ~50 s here; the GPU bench times it).
"""

from __future__ import annotations

import copy

import pytest
import torch

from lactchain.bench.device import _pairs
from lactchain.train import compiled as compiled_module
from lactchain.train.actor import train_actor
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.compiled import compiles

@pytest.fixture
def traced_only(monkeypatch):
    monkeypatch.setattr(compiled_module, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def _train(actor, pairs, tmp_path, loss: str, compiled: bool) -> tuple[dict, list[float]]:
    losses: list[float] = []
    trl = {} if loss == "rft" else dict(bf16=False, save_steps=10_000, save_total_limit=1)
    config = TrainActorConfig(loss=loss, max_steps=3, batch_size=len(pairs), seed=0, lr=1e-3,
                              shared_prefix=False, torch_compile=compiled, **trl)
    config.check()
    base = actor.model
    actor.model = copy.deepcopy(base)
    try:
        result = train_actor(actor, pairs, config, output_dir=tmp_path / f"{loss}-{compiled}",
                             on_log=lambda step, total, metrics: "loss" in metrics and losses.append(metrics["loss"]))
    finally:
        actor.model = base
    return result, losses


@pytest.mark.parametrize("loss", ["simpo", "rft"])
def test_a_compiled_step_trains_as_the_plain_one(tiny_actor, tmp_path, traced_only, loss):
    pairs = _pairs(tiny_actor)
    plain, plain_losses = _train(tiny_actor, pairs, tmp_path, loss, compiled=False)
    assert plain["torch_compile"] is False
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 0

    done, compiled_losses = _train(tiny_actor, pairs, tmp_path, loss, compiled=True)
    assert done["torch_compile"] is True
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # the forward really went through dynamo
    assert len(compiled_losses) == len(plain_losses) == 3
    assert compiled_losses == pytest.approx(plain_losses, rel=1e-4, abs=1e-5)
    assert plain_losses[-1] != plain_losses[0]  # the steps did train
    assert done["first_step_s"] > 0 and done["median_step_s"] > 0


def test_compiling_is_off_on_a_cpu_unless_asked(tiny_actor, traced_only):
    assert compiles(tiny_actor.model, None) is False
    assert compiles(tiny_actor.model, True) is True


def test_the_loop_refuses_compiling_grpo_in_one_line(lc, tmp_path):
    db = tmp_path / "registry.db"
    code, out, err = lc("pipeline", "--actor", "tiny", "--critic", "tiny", "--loss", "grpo", "--train-compile",
                        "--db", db)
    assert code != 0
    assert "train-compile" in err and "grpo" in err and "leave it out" in err
    assert "Traceback" not in out + err
    assert not db.exists()  # refused before any run exists



def test_compiling_without_a_compiler_is_refused_before_any_run(lc, tmp_path, monkeypatch, tiny_actor):
    """On a CPU inductor needs a C++ compiler: without one on PATH, `--train-compile` is a
    one-line refusal naming the fix, and the library refuses before training starts."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    db = tmp_path / "registry.db"
    code, out, err = lc("pipeline", "--actor", "tiny", "--critic", "tiny", "--loss", "rft", "--train-compile",
                        "--db", db)
    assert code != 0 and "Traceback" not in out + err
    assert "train-compile" in err and "C++ compiler" in err and "--no-train-compile" in err
    assert not db.exists()
    with pytest.raises(ValueError, match=r"C\+\+ compiler"):
        compiles(tiny_actor.model, True)
    assert compiles(tiny_actor.model, None) is False  # the default never needs one on a CPU
    code, out, err = lc("bench", "device", "--actor", "tiny", "--critic", "tiny", "--device", "cpu",
                        "--phases", "train_step", "--compiled", "--db", db)
    assert code != 0 and out == "" and "--compiled" in err and "C++ compiler" in err and "Traceback" not in err
    assert not db.exists()
