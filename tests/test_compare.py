"""`bench learn --compare`: a same-budget method comparison, one pipeline child run per
(loss, explore, seed) cell, resumable cell by cell, with its JSON, PNG and markdown
table; bad settings refused in one line before any run exists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lactchain.loop.config import LOOP_LR
from lactchain.runs.registry import Registry

from cli_helpers import wait_until

pytestmark = pytest.mark.usefixtures("one_thread")

# 8 start states trained and evaluated, no zero-shot transfer (tests/test_walls.py checks it): a cell
# costs ~11 s of work instead of ~21 s, most of what is left being its imports and model loads.
TINY = ["--actor", "tiny", "--critic", "tiny", "--budget-iterations", "1", "--budget-min", "5",
        "--td-lists-per-state", "16", "--td-rounds", "2", "--actor-epochs", "1", "--explore", "16",
        "--states", "8", "--eval-states", "8", "--no-transfer", "--json"]


@pytest.mark.slow
def test_compare_runs_every_cell_writes_json_png_table_resumes_at_the_first_unfinished_cell_and_keeps_carried_cells(
        lc, tmp_path):
    db = tmp_path / "registry.db"
    code, out, err = lc("bench", "learn", "--compare", "rft,grpo", *TINY, "--db", db)
    assert code == 0, err[-2000:]
    result = json.loads(out)
    cells = {c["key"]: c for c in result["cells"]}
    assert set(cells) == {"rft-explore16-seed0", "grpo-explore16-seed0"}
    for c in cells.values():
        assert len(c["curve"]) == 2 and c["curve"][1]["env_moves"] > c["curve"][0]["env_moves"]
    assert cells["rft-explore16-seed0"]["curve"][0]["env_moves"] > 0  # the critic's fit, before any training
    assert cells["grpo-explore16-seed0"]["curve"][0]["env_moves"] == 0  # paid by the env: no critic fitted
    with Registry(db) as reg:
        children = reg.list_runs(parent_id=result["run_id"])
        assert sorted(r["status"] for r in children) == ["FINISHED", "FINISHED"]
        assert {reg.params(r["id"])["loss"] for r in children} == {"rft", "grpo"}
        progress = [r["value"] for r in reg.metric_history(result["run_id"], "progress")]  # over its cells
    assert progress == sorted(progress) and progress[-1] == 1.0 and 0.5 in progress and progress[0] < 0.5
    table = Path(result["compare_md"]).read_text()
    assert "| rft | 16 | 0 |" in table and "| grpo | 16 | 0 |" in table
    # minutes compare only on like machines: each cell says which one it ran on
    assert all(c["machine"]["cores"] == os.cpu_count() and c["machine"]["cpu"] for c in cells.values())
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert all(c["code"]["commit"] == (head or None) for c in cells.values())  # the code each number came from
    assert f"{os.cpu_count()} cores" in table.splitlines()[-1] and "(rft-explore16-seed0, grpo-explore16-seed0)" in table
    assert Path(result["compare_png"]).stat().st_size > 10_000
    assert {r["loss"] for r in json.loads(Path(result["compare_json"]).read_text())["table"]} == {"rft", "grpo"}

    # a stopped comparison: its grpo cell never finished; the resume keeps rft and runs grpo only, with
    # the learning rate its finished grpo cell (another seed's, run before the default changed) resolved to
    cells_dir = Path(result["compare_json"]).parent / "cells"
    grpo_cell = json.loads((cells_dir / "grpo-explore16-seed0.json").read_text())
    grpo_cell["settings"]["actor_lr"] = 3e-4
    (cells_dir / "grpo-explore16-seed1.json").write_text(json.dumps({**grpo_cell, "seed": 1, "key": "grpo-explore16-seed1"}))
    (cells_dir / "grpo-explore16-seed0.json").unlink()
    code, out, err = lc("bench", "learn", "--compare", "rft,grpo", *TINY, "--resume-from", result["run_id"],
                        "--db", db)
    assert code == 0, err[-2000:]
    again = json.loads(out)
    assert "2 finished cell(s) kept" in err
    assert "cell grpo-explore16-seed0 runs as this comparison's finished grpo cells ran: actor-lr 0.0003 " \
           f"(default now: {LOOP_LR['grpo']!r})" in " ".join(err.split())
    kept = {c["key"]: c for c in again["cells"]}
    assert set(kept) == {"rft-explore16-seed0", "grpo-explore16-seed0"}  # the plan's cells only
    assert kept["rft-explore16-seed0"]["run_id"] == cells["rft-explore16-seed0"]["run_id"]
    assert kept["grpo-explore16-seed0"]["run_id"] != cells["grpo-explore16-seed0"]["run_id"]
    assert kept["grpo-explore16-seed0"]["settings"]["actor_lr"] == 3e-4
    with Registry(db) as reg:
        rerun = reg.list_runs(parent_id=again["run_id"])
        assert [(reg.params(r["id"])["loss"], reg.params(r["id"])["actor_lr"]) for r in rerun] == [("grpo", 3e-4)]
    (Path(again["compare_json"]).parent / "cells" / "grpo-explore16-seed1.json").unlink()  # not this plan's

    # the cells carried to another machine (no registry): kept there, nothing runs again
    carried = tmp_path / "carried"
    shutil.copytree(Path(again["compare_json"]).parent / "cells", carried)
    assert json.loads((carried / "rft-explore16-seed0.json").read_text())["settings"]["td_lists_per_state"] == 16
    rft_cell = carried / "rft-explore16-seed0.json"  # measured on other code: kept, and the log says so
    rft_cell.write_text(json.dumps({**json.loads(rft_cell.read_text()), "code": {"commit": "0123456789ab"}}))
    other = tmp_path / "other.db"
    code, out, err = lc("bench", "learn", "--compare", "rft", *TINY, "--cells-from", carried, "--db", other)
    assert code == 0, err[-2000:]
    if head:
        assert f"(code 0123456789ab; this run: {head})" in " ".join(err.split())
    moved = json.loads(out)
    assert [(c["key"], c["run_id"]) for c in moved["cells"]] == [("rft-explore16-seed0", kept["rft-explore16-seed0"]["run_id"])]
    with Registry(other) as reg:
        assert reg.list_runs(parent_id=moved["run_id"]) == []
    assert "| rft | 16 | 0 |" in Path(moved["compare_md"]).read_text()

    # a cell run with other settings is refused before any run exists, naming the setting
    code, _, err = lc("bench", "learn", "--compare", "rft,grpo", *TINY, "--samples", "3", "--cells-from", carried,
                      "--db", tmp_path / "third.db")
    assert code != 0 and "cell rft-explore16-seed0 was run with samples 4 (this benchmark: 3)" in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1
    # so is the resumed grpo cell in a new comparison: it ran at its comparison's rate, not today's default
    code, _, err = lc("bench", "learn", "--compare", "rft,grpo", *TINY, "--cells-from", carried,
                      "--db", tmp_path / "fourth.db")
    assert code != 0 and "cell grpo-explore16-seed0 was run with actor-lr 0.0003 " \
                           f"(this benchmark: {LOOP_LR['grpo']!r})" in err, err


@pytest.mark.parametrize("argv, message", [
    (["--compare", "rft,sft"], "--compare 'rft,sft': unknown loss sft"),
    (["--compare", "rft,rft"], "--compare names rft more than once"),
    (["--compare", ","], "--compare is empty"),
    (["--compare", "rft", "--seeds", ""], "--seeds is empty"),
    (["--compare", "rft", "--seeds", ",".join(map(str, range(21)))], "--seeds has 21 items"),
    (["--compare", "rft", "--seeds", "0,x"], "--seeds 0,x: every item must be a whole number"),
    (["--compare", "rft", "--explore", "0,-1"], "--explore '0,-1': must be >= 0"),
    (["--explore", "0,256"], "a list of settings needs --compare"),
    (["--seeds", "0,1"], "a list of settings needs --compare"),
    (["--compare", "rft,simpo", "--samples", "1"], "samples must be >= 2"),
    (["--compare", "rft", "--cells-from", "no-such-folder"], "no-such-folder is not a folder"),
    (["--cells-from", "."], "keeps the cells of a comparison; add --compare LOSSES"),
    (["--compare", "rft", "--cells-from", "."], "holds no benchmark cells"),
])
def test_bad_comparison_settings_are_one_line_refusals_before_any_run(lc, tmp_path, argv, message):
    db = tmp_path / "registry.db"
    code, _, err = lc("bench", "learn", "--actor", "tiny", *argv, "--db", db)
    assert code != 0 and message in err, err
    assert "Traceback" not in err and len([line for line in err.splitlines() if line.strip()]) == 1
    with Registry(db) as reg:
        assert reg.list_runs() == []


def test_cells_run_seed_by_seed_so_a_stopped_comparison_already_compares_every_method():
    from lactchain.jobs.loop import BenchLearnConfig

    config = BenchLearnConfig(compare="rft,simpo", seeds="0,1", explore="0,256")
    config.check()
    assert config.cells() == [("rft", 0, 0), ("simpo", 0, 0), ("rft", 256, 0), ("simpo", 256, 0),
                              ("rft", 0, 1), ("simpo", 0, 1), ("rft", 256, 1), ("simpo", 256, 1)]


def test_a_resumed_comparison_keeps_the_defaults_its_finished_cells_of_a_loss_ran_with():
    """KTO's defaults changed (lr 1e-4 -> 1e-3, the NLL term 0 -> 1) while comparisons were
    stopped half-way: their unfinished KTO cells run as the finished ones did, whatever
    today's defaults; a setting the comparison gives itself is never replaced."""
    from lactchain.jobs.loop import BenchLearnConfig
    from lactchain.loop.config import LOOP_GRPO_RECIPE, LOOP_RPO_ALPHA

    config = BenchLearnConfig(compare="kto,grpo", seeds="0,1", explore="256")
    config.check()
    recorded = {**config.cell_settings("kto", 256, 0), "actor_lr": 1e-4, "rpo_alpha": None}  # as old cells hold it
    finished = [{"loss": "kto", "explore": 256, "seed": 0, "settings": recorded}]
    pinned = config.defaults_ran("kto", finished)
    assert pinned["actor_lr"] == 1e-4 and pinned["rpo_alpha"] is None and "kto_balance" not in pinned
    cell = config.cell_config("kto", 256, 1, pinned)
    assert (cell.actor_lr, cell.preference.rpo_alpha) == (1e-4, 0.0)  # unset then: ran without the term
    assert config.cell_settings("kto", 256, 1, pinned)["actor_lr"] == 1e-4
    today = config.cell_config("kto", 256, 1)
    assert (today.actor_lr, today.preference.rpo_alpha) == (LOOP_LR["kto"], LOOP_RPO_ALPHA)
    assert config.defaults_ran("grpo", finished) == {}  # no finished grpo cell: today's defaults
    assert config.cell_config("grpo", 256, 1, {}).actor_lr == LOOP_LR["grpo"]

    # GRPO cells before 2026-11-29 record no policy_logprobs: they scored their samples raw.
    old_grpo = {k: v for k, v in config.cell_settings("grpo", 256, 0).items() if k != "policy_logprobs"}
    pinned = config.defaults_ran("grpo", [{"loss": "grpo", "explore": 256, "seed": 0, "settings": old_grpo}])
    assert pinned["policy_logprobs"] == "raw"
    assert config.cell_config("grpo", 256, 1, pinned).grpo.policy_logprobs == "raw"
    assert config.cell_config("grpo", 256, 1, {}).grpo.policy_logprobs == LOOP_GRPO_RECIPE["policy_logprobs"]

    told = BenchLearnConfig.from_params({"compare": "kto", "actor_lr": 5e-4, "rpo_alpha": 0.5})
    told.check()
    assert told.defaults_ran("kto", finished).keys().isdisjoint({"actor_lr", "rpo_alpha"})
    assert told.cell_config("kto", 256, 0, told.defaults_ran("kto", finished)).actor_lr == 5e-4


def test_a_comparison_stopped_before_grpos_recipe_runs_its_other_grpo_cells_as_its_finished_one_ran():
    """GRPO's loop defaults became a recipe (entropy control, masked scoring, replay, lr 1e-3)
    while comparisons were stopped half-way. A finished GRPO cell paid by the env's success,
    recorded before the entropy settings existed, pins the others: they run without any of
    the recipe, as it did."""
    from lactchain.jobs.loop import BenchLearnConfig

    config = BenchLearnConfig(compare="grpo", seeds="0,1", explore="0")
    config.check()
    recipe = ("entropy_coef", "entropy_target", "policy_logprobs", "replay_best")
    old = {k: v for k, v in config.cell_settings("grpo", 0, 0).items() if k not in recipe}
    old.update(grpo_reward="success", actor_lr=1e-4)
    pinned = config.defaults_ran("grpo", [{"loss": "grpo", "explore": 0, "seed": 0, "settings": old}])
    cell = config.cell_config("grpo", 0, 1, pinned)
    assert (cell.grpo_reward, cell.actor_lr) == ("success", 1e-4)
    assert {k: getattr(cell.grpo, k) for k in recipe} == \
        {"entropy_coef": 0.0, "entropy_target": 0.0, "policy_logprobs": "raw", "replay_best": False}
    assert config.cell_config("grpo", 0, 1).grpo.replay_best is True  # a new comparison: the recipe


def _older_cell_without(folder, loss: str, explore: int, setting: str, **params):
    """Write the cell (loss, explore, seed 0) as one made before `setting` was recorded:
    this comparison's settings for it (with `params`), less that one (returned)."""
    from lactchain.jobs.loop import BenchLearnConfig

    base = BenchLearnConfig.from_params({"compare": loss, "seeds": "0", "explore": str(explore), **params})
    base.check()
    settings = base.cell_settings(loss, explore, 0)
    dropped = settings.pop(setting, None)
    key = f"{loss}-explore{explore}-seed0"
    cell = {"key": key, "loss": loss, "explore": explore, "seed": 0, "curve": [], "settings": settings}
    (folder / f"{key}.json").write_text(json.dumps(cell))
    return dropped


def _kept_keys(folder, loss: str, explore: int, **params) -> list[str]:
    """The cells of `folder` a comparison of `loss` at `explore` with `params` keeps."""
    from lactchain.jobs.loop import BenchLearnConfig

    config = BenchLearnConfig.from_params({"compare": loss, "seeds": "0", "explore": str(explore),
                                           "cells_from": str(folder), **params})
    config.check()
    return [c["key"] for c in config.kept_cells()]


def test_a_grpo_cell_that_records_no_policy_logprobs_is_not_carried_into_a_constrained_comparison(tmp_path):
    """An older GRPO cell scored its samples raw and did not say so: a comparison asking for
    the constrained scoring (the loop recipe's default) refuses to carry it, one asking for
    raw keeps it."""
    from lactchain.config import ConfigError

    _older_cell_without(tmp_path, "grpo", 256, "policy_logprobs")
    with pytest.raises((ValueError, ConfigError), match=r"policy-logprobs 'raw' \(this benchmark: 'constrained'\)"):
        _kept_keys(tmp_path, "grpo", 256)
    assert _kept_keys(tmp_path, "grpo", 256, policy_logprobs="raw") == ["grpo-explore256-seed0"]


def test_cells_decoded_with_any_spelling_are_not_carried_into_a_canonical_spelling_comparison(tmp_path):
    """Cells from before the option record no grammar spelling (they decoded any): a
    comparison decoding with canonical spellings only refuses to carry them; one at the
    default keeps them."""
    from lactchain.config import ConfigError

    assert _older_cell_without(tmp_path, "rft", 16, "grammar_spelling") == "any"
    with pytest.raises((ValueError, ConfigError), match=r"grammar-spelling 'any' \(this benchmark: 'canonical'\)"):
        _kept_keys(tmp_path, "rft", 16, grammar_spelling="canonical")
    assert _kept_keys(tmp_path, "rft", 16) == ["rft-explore16-seed0"]


def test_grpo_cells_from_before_the_greedy_member_are_not_carried_into_a_comparison_with_it(tmp_path):
    """GRPO cells from before `--greedy-member` record no such setting (their groups were all
    sampled): a comparison with the greedy member refuses to carry them; one without keeps them."""
    from lactchain.config import ConfigError

    assert _older_cell_without(tmp_path, "grpo", 0, "greedy_member") is False
    with pytest.raises((ValueError, ConfigError), match=r"greedy-member False \(this benchmark: True\)"):
        _kept_keys(tmp_path, "grpo", 0, greedy_member=True)
    assert _kept_keys(tmp_path, "grpo", 0) == ["grpo-explore0-seed0"]


def test_grpo_cells_from_before_replay_best_are_not_carried_into_a_comparison_with_it(tmp_path):
    """GRPO cells from before `--replay-best` record no such setting (no list was replayed
    into their groups): a comparison with the replay refuses to carry them; one without
    keeps them."""
    from lactchain.config import ConfigError

    assert _older_cell_without(tmp_path, "grpo", 0, "replay_best", grpo_reward="success", replay_best=False) is False
    with pytest.raises((ValueError, ConfigError), match=r"replay-best False \(this benchmark: True\)"):
        _kept_keys(tmp_path, "grpo", 0, grpo_reward="success")  # the loop's GRPO recipe replays
    assert _kept_keys(tmp_path, "grpo", 0, grpo_reward="success", replay_best=False) == ["grpo-explore0-seed0"]


def test_runs_resume_takes_a_stopped_comparison_or_strategy_bench_but_not_a_plain_benchmark(tmp_path):
    """A --compare (or bench strategy) run resumes cell by cell; a plain bench learn measures
    one budget and is run again."""
    from lactchain.runs.resume import NotResumable, check_resumable

    with Registry(tmp_path / "registry.db") as reg:
        def stopped(kind: str, cmd: list[str], params: dict) -> dict:
            run_id = reg.create_run(kind, params=params, cmd=cmd)
            reg.start_run(run_id)
            reg.end_run(run_id, "KILLED")
            return reg.get_run(run_id)

        check_resumable(reg, stopped("pipeline", ["lactchain", "bench", "learn"], {"compare": "rft,simpo"}))
        check_resumable(reg, stopped("strategy", ["lactchain", "bench", "strategy"], {"proposers": "edits"}))
        with pytest.raises(NotResumable, match="a --compare benchmark resumes cell by cell"):
            check_resumable(reg, stopped("pipeline", ["lactchain", "bench", "learn"], {"loss": "rft"}))


@pytest.mark.slow
@pytest.mark.parametrize("compare", [False, True])
def test_a_killed_benchmark_keeps_what_it_measured_marked_partial(compare, tmp_path, lc):
    """SIGTERM (runs kill) to a running bench learn: the run ends KILLED and the curve of
    its finished iterations (a comparison: its finished cells) is written, marked partial."""
    db = tmp_path / "registry.db"
    # TINY without --json; a later option wins over TINY's (click keeps the last value given).
    argv = ["bench", "learn", *TINY[:-1], "--budget-min", "30"]
    argv += ["--compare", "rft,simpo", "--seeds", "0,1"] if compare else ["--budget-iterations", "40"]
    code, out, err = lc(*argv, "--db", db, "--detach", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    reg = Registry(db)
    folder = reg.run_dir(run_id)
    if compare:
        wait_until(lambda: len(list((folder / "cells").glob("*.json"))) >= 1)
    else:
        wait_until(lambda: (folder / "pipeline_state.json").is_file() and sum(
            p["phase"] == "evaluate" for p in json.loads((folder / "pipeline_state.json").read_text())["phases"]) >= 2)
    code, _, err = lc("runs", "kill", run_id, "--wait", "120", "--db", db)
    assert code == 0, err
    wait_until(lambda: reg.get_run(run_id)["status"] != "RUNNING")
    assert reg.get_run(run_id)["status"] == "KILLED"
    stem = "compare.partial" if compare else "bench_learn.partial"
    wait_until(lambda: (folder / f"{stem}.json").is_file(), timeout=60)
    saved = json.loads((folder / f"{stem}.json").read_text())
    assert saved["partial"] is True
    if compare:
        assert 1 <= len(saved["cells"]) < 4 and (folder / "compare.partial.png").is_file()
        assert "partial" in (folder / "compare.partial.md").read_text()
        # a resume stopped in its turn is resumed again (a chain, not a phase of its parent), with every cell kept
        previous = run_id
        for _ in range(2):
            code, out, err = lc("runs", "resume", previous, "--db", db, "--json")
            assert code == 0, err
            resumed = json.loads(out)["run_id"]
            log = reg.run_dir(resumed) / "log.txt"
            wait_until(lambda: log.is_file() and "finished cell(s) kept" in log.read_text())
            kept = int(log.read_text().split(" finished cell(s) kept")[0].split()[-1])
            assert kept >= len(saved["cells"])
            assert lc("runs", "kill", resumed, "--wait", "120", "--db", db)[0] == 0
            wait_until(lambda: reg.get_run(resumed)["status"] != "RUNNING")
            previous = resumed
    else:
        assert len(saved["curve"]) >= 2 and saved["curve"][0]["iteration"] == 0
        assert (folder / "learning_curve.partial.png").is_file()


@pytest.mark.parametrize("moves", [[68_830, 70_546, 86_411], [0, 4_000, 120_000]])
def test_the_env_moves_axis_is_numbered_whether_the_moves_span_one_decade_or_several(moves):
    """Every cell of an explore-0 comparison starts past the same critic fit (69k-86k
    moves): a log axis over that range drew no tick at all."""
    from lactchain.bench.compare import figure

    cells = [{"loss": loss, "explore": 0, "seed": 0,
              "curve": [{"wall_s": 60.0 * i, "env_moves": m + j, "success_rate": i / 2} for i, m in enumerate(moves)]}
             for j, loss in enumerate(["rft", "simpo"])]
    fig = figure(cells, "test")
    fig.canvas.draw()
    ax = fig.axes[1]
    lo, hi = ax.get_xlim()
    shown = [t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi and t.get_text()]
    assert len(shown) >= 2, f"env-move axis over {moves} shows ticks {shown}"


def test_the_table_names_each_machine_its_cells_ran_on_and_the_cells_that_predate_the_record():
    from lactchain.bench.compare import machines_line

    ice = {"cpu": "Xeon", "cpu_kind": "family 6 model 106", "cores": 2, "cpu_bf16": [], "gpu": None}
    spr = {"cpu": "Xeon", "cpu_kind": "family 6 model 143", "cores": 2, "cpu_bf16": ["amx_bf16", "avx512_bf16"],
           "gpu": None}
    line = machines_line([{"key": "rft-s0", "machine": spr}, {"key": "rft-s1", "machine": ice},
                          {"key": "rft-s2", "machine": ice}, {"key": "old"}])
    assert line == ("Ran on: Xeon (family 6 model 143), 2 cores, bf16: amx_bf16+avx512_bf16 (rft-s0); "
                    "Xeon (family 6 model 106), 2 cores, no native bf16 (rft-s1, rft-s2); not recorded (old)\n")
