"""The held-out probe of issue 49, kept: every file a run leaves behind (critic heads,
trainer checkpoint parts, adapters, decision-transformer weights/config/tokenizer, the
reward model's head), damaged the ways a crash, a full disk, a stray edit or a hostile
copy damage it, is refused by the command that reads it with exit code 2, one line on
stderr naming the file, and no new run row. Twice per checkpoint kind: sealed (the
manifest sees the damage; the resume falls back or refuses) and unsealed (a checkpoint
saved before manifests: the loader's own checks must see it).

Real artifacts: one tiny critic, actor, decision-transformer and reward-model run made
by the CLI, damaged in place and restored after each case."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch

from lactchain.runs.checkpoints import MANIFEST
from lactchain.runs.registry import Registry

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.xdist_group("damaged_artifacts")]

DT_TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--batch-size", "16", "--eval-every", "5",
           "--checkpoint-every", "10", "--select-every", "10", "--threads", "1"]


class _Payload:
    def __reduce__(self):  # a pickle that would call a function when loaded
        return (print, ("this must never run",))


def _pickle_payload(path: Path) -> None:
    path.write_bytes(pickle.dumps({"state": _Payload()}))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def _json_edit(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return damage


def _wrong_heads(path: Path) -> None:
    from safetensors.torch import save_file

    save_file({"v_head.weight": torch.zeros(3), "q_head.0.weight": torch.zeros(64)}, str(path))


def _wrong_head(path: Path) -> None:
    from safetensors.torch import save_file

    save_file({"0.weight": torch.zeros(7), "9.bias": torch.zeros(1)}, str(path))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One registry holding a critic, an actor, a dt and a reward-model run (tiny models)."""
    from cli_helpers import run_cli_uncaptured

    def lc(*argv):
        code, out, err = run_cli_uncaptured([str(a) for a in argv])
        assert code == 0, err[-3000:]
        return json.loads(out)["run_id"]

    db = tmp_path_factory.mktemp("damaged") / "registry.db"
    play = lc("play", "--actor", "tiny", "--episodes", "16", "--envs", "8", "--start", "random", "--max-actions",
              "4", "--free", "--temperature", "1.0", "--db", db, "--json")
    critic_cmd = ["train-critic", "--episodes-from", play, "--critic", "tiny", "--batch-size", "16", "--db", db]
    critic = lc(*critic_cmd, "--epochs", "2", "--json")
    pairs = lc("collect-pairs", "--actor", "tiny", "--critic-run", critic, "--states", "6", "--db", db, "--json")
    actor_cmd = ["train-actor", "--actor", "tiny", "--pairs-from", pairs, "--batch-size", "2", "--save-steps", "2",
                 "--db", db]
    actor = lc(*actor_cmd, "--max-steps", "4", "--json")
    archive = lc("archive", "fill", "--scene", "flat", "--behaviours", "150", "--db", db, "--json")
    dt_cmd = ["dt", "train", "--archive", archive, *DT_TINY, "--db", db]
    dt = lc(*dt_cmd, "--steps", "20", "--json")
    collected = [lc("collect", "--policy", p, "-n", "80", "--db", db, "--json") for p in ("random", "optimal")]
    judge = lc("judge", "--from", collected[0], "--from", collected[1], "--pairs", "60", "--pairing", "random",
               "--db", db, "--json")
    reward = lc("train-reward", "--pairs-from", judge, "--critic", "tiny", "--epochs", "2", "--db", db, "--json")
    search_cmd = ["strategy", "search", "--actor", "tiny", "--train-states", "8", "--heldout-states", "12",
                  "--per-round", "2", "--db", db]
    search = lc(*search_cmd, "--rounds", "1", "--json")
    return {"db": db, "critic": critic, "critic_cmd": critic_cmd, "actor": actor, "actor_cmd": actor_cmd,
            "dt": dt, "dt_cmd": dt_cmd, "reward": reward, "search": search, "search_cmd": search_cmd}


def _folders(made, run: str, kind: str) -> list[Path]:
    with Registry(made["db"]) as reg:
        return [Path(a["path"]) for a in reg.artifacts(made[run], kind)]


def _refused(lc, made, argv, names: str) -> str:
    """The command exits 2 with one stderr line naming the file; no run row is added."""
    with Registry(made["db"]) as reg:
        before = [r["id"] for r in reg.list_runs()]
    code, out, err = lc(*argv)
    with Registry(made["db"]) as reg:
        after = [r["id"] for r in reg.list_runs()]
    assert code == 2 and "Traceback" not in err, (code, err[-3000:])
    assert len(err.strip().splitlines()) == 1, err
    assert names in err, err
    assert "this must never run" not in out + err
    assert after == before, "a refused command left a run row"
    return err


@pytest.fixture
def damaged(made):
    """damage(run, kind, file, how, sealed): apply to every checkpoint folder of that kind;
    restored afterwards."""
    saved: list[tuple[Path, Path]] = []

    def damage(run: str, kind: str, file: str, how: Callable[[Path], None], sealed: bool = True) -> list[Path]:
        folders = _folders(made, run, kind)
        assert folders, (run, kind)
        for folder in folders:
            backup = folder.with_name(folder.name + ".orig")
            shutil.copytree(folder, backup)
            saved.append((folder, backup))
            how(folder / file)
            if not sealed:
                (folder / MANIFEST).unlink(missing_ok=True)
        return folders

    yield damage
    for folder, backup in saved:
        shutil.rmtree(folder, ignore_errors=True)
        backup.rename(folder)


# ---- critic checkpoints ------------------------------------------------------------------------

CRITIC = {
    "heads of other tensors": ("heads.safetensors", _wrong_heads),
    "heads a pickle payload": ("heads.safetensors", _pickle_payload),
    "heads truncated": ("heads.safetensors", _truncate),
    "critic.json a list": ("critic.json", _json_edit(lambda d: [d])),
    "critic.json without its value scale": ("critic.json", _json_edit(lambda d: {k: v for k, v in d.items()
                                                                                 if k != "value_std"})),
    "adapter truncated": ("adapter/adapter_model.safetensors", _truncate),
}


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
@pytest.mark.parametrize("case", list(CRITIC))
def test_a_damaged_critic_checkpoint(case, sealed, made, damaged, lc):
    file, how = CRITIC[case]
    damaged("critic", "critic", file, how, sealed)
    name = "damaged" if sealed else file.split("/")[-1]
    _refused(lc, made, ["collect-pairs", "--actor", "tiny", "--critic-run", made["critic"], "--states", "1",
                        "--db", made["db"]], name)
    _refused(lc, made, [*made["critic_cmd"], "--epochs", "3", "--resume-from", made["critic"]], name)


# ---- actor trainer checkpoints and adapters ------------------------------------------------------

ACTOR = {
    "optimizer a pickle payload": ("optimizer.pt", _pickle_payload),
    "rng state a pickle payload": ("rng_state.pth", _pickle_payload),
    "scheduler truncated": ("scheduler.pt", _truncate),
    "adapter truncated": ("adapter_model.safetensors", _truncate),
    "trainer state garbage": ("trainer_state.json", lambda p: p.write_text("{{{")),
    "adapter of another kind": ("adapter_config.json", _json_edit(lambda d: {**d, "peft_type": "NOPE"})),
}


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
@pytest.mark.parametrize("case", list(ACTOR))
def test_a_damaged_actor_checkpoint(case, sealed, made, damaged, lc):
    file, how = ACTOR[case]
    damaged("actor", "checkpoint", file, how, sealed)
    _refused(lc, made, [*made["actor_cmd"], "--max-steps", "6", "--resume-from", made["actor"]],
             "damaged" if sealed else file)


@pytest.mark.parametrize("case", ["adapter truncated", "adapter of another kind"])
def test_a_damaged_adapter(case, made, damaged, lc):
    file, how = ACTOR[case]
    damaged("actor", "adapter", file, how)
    for command in (["evaluate", "--states", "1"], ["play", "--episodes", "1"]):
        _refused(lc, made, [*command, "--actor", "tiny", "--adapter", made["actor"], "--db", made["db"]], file)


# ---- decision transformer -------------------------------------------------------------------------

DT = {
    "config of another width": ("config.json", _json_edit(lambda d: {**d, "config": {**d["config"], "n_embd": 64}})),
    "config a list": ("config.json", _json_edit(lambda d: [d])),
    "config without its model": ("config.json", _json_edit(lambda d: {**d, "config": {"n_layer": "x"}})),
    "tokenizer garbage": ("tokenizer.json", lambda p: p.write_text("garbage")),
    "weights a pickle payload": ("model.safetensors", _pickle_payload),
    "weights truncated": ("model.safetensors", _truncate),
    "optimizer a pickle payload": ("optimizer.pt", _pickle_payload),
}


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
@pytest.mark.parametrize("case", list(DT))
def test_a_damaged_dt_checkpoint(case, sealed, made, damaged, lc):
    file, how = DT[case]
    damaged("dt", "dt", file, how, sealed)
    damaged("dt", "dt-best", file, how, sealed)
    name = "damaged" if sealed else "model.safetensors" if "width" in case else file  # the weights disagree
    if file != "optimizer.pt":  # evaluation reads no optimizer
        _refused(lc, made, ["dt", "eval", made["dt"], "--no-goal", "--limit", "2", "--db", made["db"]], name)
    _refused(lc, made, [*made["dt_cmd"], "--steps", "30", "--resume-from", made["dt"]], name)


# ---- the reward model ---------------------------------------------------------------------------------

REWARD = {
    "head a pickle payload": ("head.safetensors", _pickle_payload),
    "head truncated": ("head.safetensors", _truncate),
    "head of other tensors": ("head.safetensors", _wrong_head),
    "config garbage": ("reward_model.json", lambda p: p.write_text("nope")),
}


@pytest.mark.parametrize("case", list(REWARD))
def test_a_damaged_reward_model(case, made, damaged, lc):
    file, how = REWARD[case]
    damaged("reward", "reward-model", file, how)
    _refused(lc, made, ["reward-agents", "--reward-run", made["reward"], "--train-episodes", "10", "--eval-episodes",
                        "10", "--db", made["db"]], file)


# ---- a strategy search's saved state ------------------------------------------------------------------

@pytest.mark.parametrize("case, how", [("garbage", lambda p: p.write_text("{{{")),
                                       ("a list", lambda p: p.write_text("[1, 2]")),
                                       ("another object", lambda p: p.write_text('{"rounds": "many"}'))])
def test_a_damaged_saved_search(case, how, made, lc):
    with Registry(made["db"]) as reg:
        path = Path(reg.latest_artifact(made["search"], "strategy-search")["path"])
    kept = path.read_bytes()
    try:
        how(path)
        _refused(lc, made, [*made["search_cmd"], "--rounds", "2", "--resume-from", made["search"]], path.name)
    finally:
        path.write_bytes(kept)


# ---- checkpoints deleted ----------------------------------------------------------------------------------

@pytest.mark.parametrize("run, kind, command", [
    ("critic", "critic", lambda m: [*m["critic_cmd"], "--epochs", "3", "--resume-from", m["critic"]]),
    ("actor", "checkpoint", lambda m: [*m["actor_cmd"], "--max-steps", "6", "--resume-from", m["actor"]]),
    ("dt", "dt", lambda m: [*m["dt_cmd"], "--steps", "30", "--resume-from", m["dt"]]),
])
def test_a_resume_whose_checkpoints_were_deleted_is_refused(run, kind, command, made, damaged, lc):
    folders = damaged(run, kind, MANIFEST, lambda p: None)
    for folder in folders:
        shutil.rmtree(folder)
    _refused(lc, made, command(made), "--resume-from")


def test_a_dt_resume_passes_over_a_damaged_newest_checkpoint_and_says_so(made, damaged, lc):
    """The newest dt checkpoint damaged (sealed): the resume goes on from the one before it,
    and the log names both."""
    newest, before = _folders(made, "dt", "dt")[-1], _folders(made, "dt", "dt")[-2]
    backup = newest.with_name(newest.name + ".orig")
    shutil.copytree(newest, backup)
    try:
        _truncate(newest / "model.safetensors")
        code, out, err = lc(*made["dt_cmd"], "--steps", "30", "--resume-from", made["dt"], "--json")
        assert code == 0, err[-3000:]
        assert f"checkpoint {newest} is damaged (model.safetensors:" in err and f"using the one before it, {before}" in err, err
        assert json.loads(out)["start_step"] == int(before.name.split("-")[-1])
    finally:
        shutil.rmtree(newest, ignore_errors=True)
        backup.rename(newest)


# ---- runs saved before safetensors still open ----------------------------------------------------------

def _as_torch_file(weights: Path, nested: bool = False) -> None:
    """Rewrite NAME.safetensors as the NAME.pt older runs saved (the critic's heads nested per head)."""
    from safetensors.torch import load_file

    state = load_file(str(weights))
    if nested:
        state = {head: {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith(head + ".")}
                 for head in ("v_head", "q_head")}
    torch.save(state, weights.with_suffix(".pt"))
    weights.unlink()


def test_weights_saved_before_safetensors_still_load(made, damaged, lc):
    from lactchain.archive.dt.checkpoints import load_checkpoint
    from lactchain.models.critic import Critic
    from lactchain.train.reward_model import RewardModel

    critic_folder = _folders(made, "critic", "critic")[-1]
    dt_folder = _folders(made, "dt", "dt")[-1]
    reward_folder = _folders(made, "reward", "reward-model")[-1]
    before = (Critic.load(checkpoint=critic_folder, device="cpu").q_head.state_dict(),
              load_checkpoint(dt_folder)[0].state_dict(), RewardModel.load(reward_folder).head.state_dict())
    damaged("critic", "critic", "heads.safetensors", lambda p: _as_torch_file(p, nested=True), sealed=False)
    damaged("dt", "dt", "model.safetensors", _as_torch_file, sealed=False)
    damaged("reward", "reward-model", "head.safetensors", _as_torch_file, sealed=False)
    after_critic = Critic.load(checkpoint=critic_folder, device="cpu").q_head.state_dict()
    assert (critic_folder / "heads.pt").is_file() and not (critic_folder / "heads.safetensors").exists()
    assert all(torch.equal(before[0][k], after_critic[k]) for k in before[0])
    after_dt = load_checkpoint(dt_folder)[0].state_dict()
    assert all(torch.equal(before[1][k], after_dt[k]) for k in before[1])
    after_reward = RewardModel.load(reward_folder).head.state_dict()
    assert all(torch.equal(before[2][k], after_reward[k]) for k in before[2])
    # and an older critic is still usable by the commands that check it first
    code, out, err = lc("collect-pairs", "--actor", "tiny", "--critic-run", made["critic"], "--states", "1",
                        "--db", made["db"], "--json")
    assert code == 0, err[-2000:]
