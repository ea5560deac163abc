"""Corrupted artifacts are refused in one line before any run exists: a LoRA adapter
(truncated, zero-byte, garbled or wrong-shape weights; garbage metadata; another base
model) and a critic checkpoint (truncated or foreign heads, a pickle that is more than
tensors, a truncated adapter). Real files: a tiny adapter trained one step, a tiny critic
saved by the lab."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from lactchain.runs.registry import Registry

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    from lactchain.models.actor import Actor
    from lactchain.train.actor import train_actor
    from lactchain.train.actor_config import TrainActorConfig

    out = tmp_path_factory.mktemp("adapter")
    rows = [{"prompt": "You are at (x=0, y=0) facing east.", "chosen": ["move forward"]}] * 2
    res = train_actor(Actor.load("tiny"), rows, TrainActorConfig(loss="rft", max_steps=1, batch_size=2),
                      output_dir=out)
    return Path(res["adapter"])


@pytest.fixture(scope="module")
def critic_folder(tmp_path_factory) -> Path:
    from lactchain.models.critic import Critic

    return Critic.load("tiny").save(tmp_path_factory.mktemp("critic") / "critic")


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garble_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[8:40] = b"\xff" * 32
    path.write_bytes(bytes(data))


def _wrong_rank(folder: Path) -> None:
    config = json.loads((folder / "adapter_config.json").read_text())
    config["r"] = config["r"] * 2
    (folder / "adapter_config.json").write_text(json.dumps(config))


ADAPTER_CASES = {
    "truncated weights": (lambda f: _truncate(f / "adapter_model.safetensors"), "adapter_model.safetensors is "
                                                                                 "truncated"),
    "zero-byte weights": (lambda f: (f / "adapter_model.safetensors").write_bytes(b""),
                          "adapter_model.safetensors is empty"),
    "garbled header": (lambda f: _garble_header(f / "adapter_model.safetensors"),
                       "not a readable safetensors file"),
    "wrong shape": (_wrong_rank, "not a rank-16 LoRA factor"),
    "garbage metadata": (lambda f: (f / "lactchain_adapter.json").write_text("{{{ garbage"),
                         "lactchain_adapter.json is not readable JSON"),
    "metadata of the wrong type": (lambda f: (f / "lactchain_adapter.json").write_text('{"step": "many"}'),
                                   "field 'step' is 'many', not a int"),
    "another base model": (lambda f: (f / "lactchain_adapter.json").write_text('{"base": "smollm2-135m"}'),
                           "was trained on smollm2-135m, not tiny: use --actor smollm2-135m"),
}


@pytest.mark.parametrize("case", list(ADAPTER_CASES))
def test_a_broken_adapter_is_one_line_before_any_run(case, adapter, tmp_path, lc):
    broken = tmp_path / "adapter"
    shutil.copytree(adapter, broken)
    damage, message = ADAPTER_CASES[case]
    damage(broken)
    files = {p.name: p.read_bytes() for p in broken.iterdir()}
    db = tmp_path / "registry.db"
    Registry(db).close()
    for command in (["evaluate", "--states", "1"], ["play", "--episodes", "1"]):
        code, _, err = lc(*command, "--actor", "tiny", "--adapter", broken, "--db", db)
        assert code != 0 and message in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
    with Registry(db) as reg:
        assert reg.list_runs() == []  # no half-written eval or play run
    assert {p.name: p.read_bytes() for p in broken.iterdir()} == files  # the faulty files untouched


def test_a_sound_adapter_passes_the_checks(adapter):
    from lactchain.artifact_checks import check_adapter

    meta = check_adapter(adapter, base="tiny")
    assert meta["loss"] == "rft" and meta["base"] == "tiny"


class _NotATensor:
    def __reduce__(self):  # a pickle that would call a function when loaded
        return (print, ("this must never run",))


def _legacy_pickle(folder: Path) -> None:
    """An older critic (heads.pt, before safetensors) whose heads file is a pickle of code."""
    (folder / "heads.safetensors").unlink()
    (folder / "heads.pt").write_bytes(pickle.dumps({"v_head": _NotATensor()}))


CRITIC_CASES = {
    "truncated heads": (lambda f: _truncate(f / "heads.safetensors"), "heads.safetensors is not readable"),
    "foreign heads": (lambda f: (f / "heads.safetensors").write_bytes(b"PK\x03\x04 not a safetensors file"),
                      "heads.safetensors is not readable"),
    "a pickle under the safetensors name": (lambda f: (f / "heads.safetensors").write_bytes(
        pickle.dumps({"v_head": _NotATensor()})), "heads.safetensors is not readable"),
    "an older critic's heads a pickle of code": (_legacy_pickle, "heads.pt holds more than plain tensors (refused"),
    "truncated critic adapter": (lambda f: _truncate(f / "adapter" / "adapter_model.safetensors"),
                                 "adapter_model.safetensors is truncated"),
    "garbage critic.json": (lambda f: (f / "critic.json").write_text("nope"), "critic.json is not readable JSON"),
}


@pytest.mark.parametrize("case", list(CRITIC_CASES))
def test_a_broken_critic_checkpoint_is_one_line_before_any_run(case, critic_folder, tmp_path, lc):
    broken = tmp_path / "critic"
    shutil.copytree(critic_folder, broken)
    damage, message = CRITIC_CASES[case]
    damage(broken)
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        run_id = reg.create_run("critic", name="a critic")
        reg.add_artifact(run_id, "critic", broken)
        reg.end_run(run_id, "FINISHED")
    code, out, err = lc("collect-pairs", "--actor", "tiny", "--critic-run", run_id, "--states", "1", "--db", db)
    assert code != 0 and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "this must never run" not in out + err
    with Registry(db) as reg:
        assert [r["id"] for r in reg.list_runs()] == [run_id]  # no pairs run was created


@pytest.mark.parametrize("world, message", [
    (["--env", "taxi"], "it trained a critic for grid, not taxi; train one with `lactchain train-critic --env taxi`"),
    (["--scene", "flat"], "it learnt scene empty, not flat; pass --scene empty or train a critic on this scene"),
])
def test_a_critic_of_another_world_is_one_line_before_any_run(world, message, critic_folder, tmp_path, lc):
    """collect-pairs with a grid critic on Taxi, or on another scene: refused before the
    pairs run exists (it once failed inside it, leaving a FAILED run)."""
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        run_id = reg.create_run("critic", name="a grid critic")
        reg.add_artifact(run_id, "critic", critic_folder)
        reg.end_run(run_id, "FINISHED")
    code, _, err = lc("collect-pairs", "--actor", "tiny", "--critic-run", run_id, "--states", "1", *world, "--db", db)
    assert code == 2 and f"--critic-run {run_id}: {message}" in err and len(err.strip().splitlines()) == 1, err
    with Registry(db) as reg:
        assert [r["id"] for r in reg.list_runs()] == [run_id]
