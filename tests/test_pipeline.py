"""The whole loop on tiny models, through the real CLI entry point, and what it leaves in the registry."""

from __future__ import annotations

import json
import re

import pytest

from lactchain.envs import GridWorldEnv, State
from lactchain.loop.labelers import execute_from
from lactchain.loop.config import COLLAPSE_SHARE
from lactchain.runs.registry import Registry


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """The real `lactchain pipeline` entry point, run once in this process (the console
    script's own process is tests/test_cli_runs.py's; an interpreter start costs ~8 s here)."""
    from cli_helpers import run_cli_uncaptured

    from lactchain.loop.bookkeeping import PhaseProgress

    db = tmp_path_factory.mktemp("pipeline") / "registry.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PhaseProgress, "EVERY_S", 0.0)  # every progress line, not one per 5 s: the test's phases are short
        code, out, err = run_cli_uncaptured(["pipeline", "--actor", "tiny", "--critic", "tiny", "--states", "8",
                                             "--eval-states", "8", "--td-lists-per-state", "32", "--actor-epochs",
                                             "1", "--db", str(db), "--json"])
    assert code == 0, err
    return Registry(db), json.loads(out), err


def test_pipeline_phases_are_child_runs(pipeline_run):
    reg, out, _ = pipeline_run
    parent = reg.get_run(out["run_id"])
    assert parent["kind"] == "pipeline" and parent["status"] == "FINISHED"
    children = sorted(reg.list_runs(parent_id=parent["id"]), key=lambda r: r["created_ms"])
    assert [c["kind"] for c in children] == ["critic", "eval", "pairs", "critic", "actor", "eval"]
    assert all(c["status"] == "FINISHED" for c in children)
    assert out["before"] is not None and out["after"] is not None
    assert set(out["seconds_per_phase"]) == {"evaluate", "train-critic", "collect", "train-actor"}
    assert [row["iteration"] for row in out["curve"]] == [0, 1]
    assert 0.0 <= out["curve"][1]["ranking_accuracy"] <= 1.0 and out["curve"][1]["pairs"] >= 1
    actor_run = next(c for c in children if c["kind"] == "actor")
    assert reg.latest_artifact(actor_run["id"], "adapter") is not None
    critic_run = next(c for c in children if c["kind"] == "critic")
    assert reg.latest_artifact(critic_run["id"], "critic") is not None
    assert reg.latest_metrics(parent["id"])  # per-phase metrics rolled up on the parent


def test_a_pipeline_run_id_names_its_trained_adapter(pipeline_run):
    """After `lactchain pipeline`, `--adapter PIPELINE_RUN` (evaluate, play, the console) is
    the adapter its last train-actor phase saved, and that phase is a run the pipeline
    reads: deleting it alone is refused without --force, the pipeline named as its reader."""
    from lactchain.jobs.checks import resolve_adapter
    from lactchain.runs.delete import plan_delete

    reg, out, _ = pipeline_run
    actor_run = next(c for c in reg.list_runs(parent_id=out["run_id"]) if c["kind"] == "actor")
    trained = reg.latest_artifact(actor_run["id"], "adapter")["path"]
    assert out["adapter"] == trained
    assert resolve_adapter(reg, out["run_id"], base="tiny") == trained
    assert [a["path"] for a in reg.artifacts(out["run_id"], "adapter")] == [trained]  # once, not per phase
    plan = plan_delete(reg, [actor_run["id"]])
    assert actor_run["id"] in plan.used_by[out["run_id"]]
    assert f"{out['run_id']} reads" in plan.problem(children=False, force=False)
    assert plan.problem(children=False, force=True) is None


def test_a_pipeline_from_before_pipelines_named_their_adapter_resolves_by_its_saved_state(pipeline_run, tmp_path):
    """Registries hold pipelines made before the `adapter` artifact: their id still gives the
    adapter their saved loop state goes on from (while its folder is there)."""
    from lactchain.jobs.checks import resolve_adapter
    from lactchain.loop.bookkeeping import STATE_FILE, STATE_KIND

    _, out, _ = pipeline_run
    reg = Registry(tmp_path / "registry.db")
    older = reg.create_run("pipeline", name="made before", params={"actor": "tiny"})
    state = reg.run_dir(older) / STATE_FILE
    state.write_text(json.dumps({"phases": [], "adapter": out["adapter"]}))
    reg.add_artifact(older, STATE_KIND, state)
    reg.end_run(older, "FINISHED")
    assert resolve_adapter(reg, older, base="tiny") == out["adapter"]
    state.write_text(json.dumps({"phases": [], "adapter": str(tmp_path / "gone")}))
    with pytest.raises(ValueError, match="has no saved adapter"):
        resolve_adapter(reg, older)


def test_the_pipelines_table_ends_with_how_to_use_its_adapter(pipeline_run):
    from lactchain.cli.common import console
    from lactchain.cli.pipeline_cmd import render_pipeline

    _, out, _ = pipeline_run
    with console.capture() as captured:
        render_pipeline(out)
    shown = " ".join(captured.get().split())
    assert "trained adapter: " in shown and f"(lactchain evaluate --adapter {out['run_id']})" in shown


def test_the_pipeline_shows_progress_inside_its_phases(pipeline_run):
    """Inside a phase the pipeline's log and metrics move: the critic's rounds, the
    evaluation's lock-steps, collect's states and the trainer's steps as log lines, the
    critic's and the trainer's figures live on the pipeline run itself."""
    reg, out, stderr = pipeline_run
    assert "iteration 0 train-critic: round 1/8 v_loss=" in stderr  # the first fit's 8 rounds
    rounds = reg.metric_history(out["run_id"], "live/train-critic/round")
    assert [r["value"] for r in rounds] == [*range(1, 9), 1.0, 2.0]  # then each iteration's 2 more
    assert re.search(r"iteration 0 evaluate: \d/8 episodes, 8 env steps", stderr)  # after its first lock-step
    assert "iteration 1 collect: 8/8 states" in stderr
    assert "iteration 1 train-actor: step 1/" in stderr
    live = reg.metric_history(out["run_id"], "live/train-actor/loss")
    assert live and [r["step"] for r in live] == list(range(1, len(live) + 1))
    # the console's Jobs column: the share of the iterations done, moving as phases end
    progress = [r["value"] for r in reg.metric_history(out["run_id"], "progress")]
    assert progress == sorted(progress) and progress[-1] == 1.0 and 0.25 in progress and 0.75 in progress
    # and each phase's own run, as a standalone job's: its row in the Jobs list moves too
    for child in reg.list_runs(parent_id=out["run_id"]):
        own = [r["value"] for r in reg.metric_history(child["id"], "progress")]
        assert own and own == sorted(own) and 0.0 < own[-1] <= 1.0, (child["kind"], own)


def test_the_runs_collapse_warning_speaks_of_its_last_evaluation(pipeline_run):
    """A collapsed evaluation tags its own eval run; the pipeline run carries the warning
    only while its latest policy is collapsed (the untrained model's collapse at iteration 0
    must not stay on a run whose actor learned since)."""
    reg, out, _ = pipeline_run
    evals = sorted((c for c in reg.list_runs(parent_id=out["run_id"]) if c["kind"] == "eval"),
                   key=lambda r: r["created_ms"])
    for row, run in zip(out["curve"], evals):
        tagged = reg.tags(run["id"]).get("warning", "")
        assert tagged.startswith("collapse:") == (row["top_answer_share"] > COLLAPSE_SHARE), (row, tagged)
        if tagged:
            assert f"(iteration {row['iteration']})" in tagged
    last = out["curve"][-1]
    warning = reg.tags(out["run_id"]).get("warning", "")
    assert warning.startswith("collapse:") == (last["top_answer_share"] > COLLAPSE_SHARE), (last, warning)


def test_pipeline_pairs_differ_and_replay_from_their_start_state(pipeline_run):
    reg, out, _ = pipeline_run
    pairs_run = next(r for r in reg.list_runs(parent_id=out["run_id"]) if r["kind"] == "pairs")
    pairs = reg.pairs(run_ids=[pairs_run["id"]])
    assert pairs, "the pair builder produced an empty dataset"
    env = GridWorldEnv()
    for p in pairs:
        assert p["chosen"] != p["rejected"]
        assert p["chosen_score"] > p["rejected_score"]
        start = State(**p["state"])
        for side in ("chosen", "rejected"):
            reward, nxt, done = execute_from(env, start, p[side])
            assert nxt.as_dict() == p["meta"][f"{side}_next_state"]
            assert reward == p["meta"][f"{side}_reward"]


def test_pipeline_rejects_bad_options_before_creating_a_run(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, _, err = lc("pipeline", "--actor", "tiny", "--labeler", "psychic", "--db", db)
    assert code == 2 and "Traceback" not in err
    assert "labeler must be one of critic, rollout, oracle, judge" in " ".join(err.split())
    assert not db.exists() or Registry(db).list_runs() == []


def test_a_resume_goes_on_with_its_runs_settings_or_is_refused_before_any_run(pipeline_run, tmp_path, capsys):
    """`pipeline --resume-from RUN` with another world or loss, of a FINISHED pipeline, or of
    one a resume already carried to its end: one line, no run (a resume on Taxi of a grid
    run once failed inside a new run; another --loss switched the loss mid-lineage)."""
    from cli_helpers import run_cli

    from lactchain.runs.resume import RESUMES_TAG

    reg, out, _ = pipeline_run
    ran = reg.params(out["run_id"])
    db = tmp_path / "registry.db"
    with Registry(db) as fresh:
        killed = fresh.create_run("pipeline", params=ran, cmd=["lactchain", "pipeline"], status="KILLED")
        finished = fresh.create_run("pipeline", params=ran, cmd=["lactchain", "pipeline"], status="FINISHED")
        carried = fresh.create_run("pipeline", params=ran, cmd=["lactchain", "pipeline"], status="KILLED")
        by = fresh.create_run("pipeline", params=ran, parent_id=carried, status="FINISHED", tags={RESUMES_TAG: carried})
    same = ["pipeline", "--actor", "tiny", "--critic", "tiny", "--states", "8", "--eval-states", "8",
            "--td-lists-per-state", "32", "--actor-epochs", "1", "--db", str(db)]
    for extra, words in ((["--resume-from", killed, "--env", "taxi", "--loss", "dpo"],
                          ["--env 'taxi' (it ran with 'grid')", "--loss 'dpo' (it ran with 'rft')",
                           f"let `lactchain runs resume {killed}` take them"]),
                         (["--resume-from", killed, "--iterations", "3"], ["--iterations 3 (it ran with 1)"]),
                         (["--resume-from", finished], [f"run {finished} is FINISHED"]),
                         (["--resume-from", carried], [f"run {carried} was resumed to the end by {by}"])):
        code, _, err = run_cli([*same, *extra], capsys)
        err = " ".join(err.split())
        assert code == 2 and all(w in err for w in words) and err.startswith("error: --resume-from"), err
    assert len(Registry(db).list_runs()) == 4


@pytest.mark.parametrize("labeler, loss, extra", [("oracle", "rft", {}),
                                                   ("rollout", "simpo", {"simpo": {"cpo_alpha": 1.0},
                                                                         "actor_batch_tokens": 1_000_000})])
def test_pipeline_runs_with_every_labeler_and_records_its_pairs(tmp_path, labeler, loss, extra):
    from lactchain.jobs import run_context
    from lactchain.loop.config import PipelineConfig
    from lactchain.loop.pipeline import run_pipeline

    reg = Registry(tmp_path / "registry.db")
    cfg = PipelineConfig(actor="tiny", critic="tiny", labeler=labeler, loss=loss, states=4, eval_states=4, **extra)
    with run_context(reg, "pipeline", name="labelers", params=cfg.params()) as handle:
        out = run_pipeline(handle, cfg)
    kinds = [c["kind"] for c in sorted(reg.list_runs(parent_id=handle.run_id), key=lambda r: r["created_ms"])]
    assert kinds[:2] == ["eval", "pairs"] and "critic" not in kinds  # only the critic labeler trains one
    pairs = reg.pairs(run_ids=[next(c["id"] for c in reg.list_runs(parent_id=handle.run_id) if c["kind"] == "pairs")])
    assert pairs and {p["labeler"] for p in pairs} == {labeler}
    assert out["curve"][-1]["ranking_accuracy"] is not None
    if labeler == "oracle":
        assert out["curve"][-1]["ranking_accuracy"] == 1.0  # the oracle agrees with itself
    if "actor_batch_tokens" in extra:  # a budget that holds every pair: one step, the lr by the square-root rule
        [size] = [r["value"] for r in reg.metric_history(handle.run_id, "train-actor/batch_size")]
        [lr] = [r["value"] for r in reg.metric_history(handle.run_id, "train-actor/start_lr")]
        [steps] = [r["value"] for r in reg.metric_history(handle.run_id, "train-actor/steps")]
        assert size == len(pairs) and lr == pytest.approx(cfg.actor_lr * (size / cfg.actor_batch_size) ** 0.5)
        assert steps == round(cfg.actor_epochs)


def test_the_loops_per_loss_settings_are_the_trainers_own_parts():
    """The loop's config holds train-actor's per-loss parts (no copied fields): each
    setting a loss reads reaches its trainer as given on the loop's flat params; the
    loop's own defaults (DPO's and SimPO's NLL weight) apply to their loss only; an older
    run's params (0 for another loss's NLL weight) still open."""
    import dataclasses

    from lactchain.config import flat_names
    from lactchain.loop.config import PipelineConfig, trainer_config
    from lactchain.train.actor_config import GRPOSettings, PreferenceSettings, SimPOSettings

    top = {f.name for f in dataclasses.fields(PipelineConfig)}
    for part in (PreferenceSettings, SimPOSettings, GRPOSettings):
        assert not top & set(flat_names(part)), part  # defined once, in the trainer's part
    base = {"actor": "tiny", "critic": "tiny"}
    grpo = PipelineConfig.from_params({**base, "loss": "grpo", "kl_beta": 0.04, "tokens_per_pass": 512,
                                       "states_per_step": 4, "grouping": "state"})
    trainer = trainer_config(grpo, seed=5)
    assert trainer.grpo == grpo.grpo and (trainer.grpo.kl_beta, trainer.grpo.tokens_per_pass) == (0.04, 512)
    assert trainer.seed == 5 and trainer.lr == grpo.actor_lr and grpo.params()["kl_beta"] == 0.04
    dpo = trainer_config(PipelineConfig.from_params({**base, "loss": "dpo", "dpo_loss": "ipo"}), seed=0)
    assert (dpo.preference.rpo_alpha, dpo.preference.dpo_loss) == (1.0, "ipo")
    assert trainer_config(PipelineConfig.from_params({**base, "loss": "simpo"}), seed=0).cpo_alpha == 1.0
    assert trainer_config(PipelineConfig.from_params({**base, "loss": "dpo", "rpo_alpha": 0}), seed=0) \
        .preference.rpo_alpha == 0.0  # plain DPO when asked
    older = PipelineConfig.from_params({**base, "loss": "rft", "cpo_alpha": 0.0, "rpo_alpha": 0.0})
    assert older.simpo.cpo_alpha is None and older.preference.rpo_alpha is None
    # no periodic trainer checkpoints in a phase: a stopped pipeline redoes the phase, never reads them
    from lactchain.loop.config import LOOP_SAVE_STEPS

    for loss in ("simpo", "dpo", "kto", "grpo"):
        assert trainer_config(PipelineConfig.from_params({**base, "loss": loss}), seed=0).save_steps == LOOP_SAVE_STEPS
    rft = trainer_config(PipelineConfig.from_params({**base, "loss": "rft"}), seed=0)
    assert rft.save_steps == type(rft)().save_steps  # rft reads no save_steps: left at its default


def test_the_loop_trains_in_bf16_only_where_bf16_is_native():
    """Emulated bf16 trains ~5x slower (a CPU without AMX / AVX512-bf16), so the loop's
    default is bf16 autocast where it is native and fp32 elsewhere, resolved once and
    recorded; an explicit choice and an older run's recorded True are kept."""
    from lactchain.machine import _bf16_flags, native_bf16_here
    from lactchain.loop.config import PipelineConfig, trainer_config

    assert _bf16_flags({"flags": "fpu sse avx2 avx512f avx512_bf16"}) == ["avx512_bf16"]
    assert _bf16_flags({"flags": "fpu sse avx2"}) == [] and _bf16_flags({}) == []
    base = {"actor": "tiny", "critic": "tiny", "loss": "dpo"}
    default = PipelineConfig(**base)
    assert default.train_bf16 is native_bf16_here() and default.params()["train_bf16"] is native_bf16_here()
    assert trainer_config(default, seed=0).bf16 is native_bf16_here()
    assert PipelineConfig(**base, train_bf16=False).train_bf16 is False
    assert PipelineConfig.from_params({**base, "train_bf16": True}).train_bf16 is True  # an older run's record
    assert trainer_config(PipelineConfig(**{**base, "loss": "rft"}), seed=0).bf16 is None  # rft trains fp32


def test_lactchain_cpu_bf16_0_gives_fp32_defaults_on_any_cpu(monkeypatch):
    """LACTCHAIN_CPU_BF16=0 makes a CPU with native bf16 default to fp32 (generation and
    training), so a run's arithmetic matches a CPU without it; the job processes inherit it."""
    from lactchain.machine import cpu_has_bf16, fast_generation_dtype
    from lactchain.loop.config import PipelineConfig

    monkeypatch.setenv("LACTCHAIN_CPU_BF16", "0")
    cpu_has_bf16.cache_clear()
    try:
        assert cpu_has_bf16() is False and fast_generation_dtype() == "float32"
        assert PipelineConfig(actor="tiny", critic="tiny").train_bf16 is False
    finally:
        monkeypatch.delenv("LACTCHAIN_CPU_BF16")
        cpu_has_bf16.cache_clear()


def test_evaluating_an_adapter_elsewhere_than_it_learned_says_where_it_learned(pipeline_run):
    """`evaluate --adapter PIPELINE` on another scene than the pipeline's plays it (transfer is
    a fair experiment) and says in one line where the actor learned and the options that play
    there (a strategy version written for another env, likewise); where it learned, nothing is said. A phase's run and the adapter's folder name
    the same world (the phase's from its pipeline)."""
    from cli_helpers import run_cli_uncaptured

    from lactchain.jobs.checks import adapter_world, run_notes, world_note

    reg, out, _ = pipeline_run
    db = str(reg.path)
    for_taxi = reg.save_prompt("Pick up the passenger first.", env="taxi")  # saved in the console's Lab on Taxi
    code, _, err = run_cli_uncaptured(["evaluate", "--actor", "tiny", "--adapter", out["run_id"], "--scene", "maze",
                                       "--strategy", str(for_taxi), "--states", "2", "--db", db, "--json"])
    assert code == 0, err
    note = next(line for line in err.splitlines() if line.startswith("note: adapter"))
    assert f"note: adapter {out['run_id']} learned on grid (run {out['run_id']}); this run plays grid maze" in note
    assert "pass --env grid without --scene to play where it learned" in note
    assert f"note: strategy version {for_taxi} was written for taxi; this run plays grid" in err
    code, _, err = run_cli_uncaptured(["evaluate", "--actor", "tiny", "--adapter", out["run_id"], "--states", "2",
                                       "--db", db, "--json"])
    assert code == 0 and "note: adapter" not in err
    actor_run = next(c for c in reg.list_runs(parent_id=out["run_id"]) if c["kind"] == "actor")
    assert adapter_world(reg, actor_run["id"]) == (out["run_id"], {"env": "grid"})
    assert adapter_world(reg, out["adapter"]) == (out["run_id"], {"env": "grid"})
    assert world_note(reg, out["adapter"], {"env": "grid", "state_text": "coords"}).endswith(
        "this run plays grid, coords text: pass --env grid --state-text egocentric to play where it learned")
    assert world_note(reg, "/not/a/run/folder", {"env": "taxi"}) == ""
    assert world_note(reg, out["adapter"], {"env": "grid", "scene": "empty"}) == ""  # the default scene, named
    stray = reg.runs_dir / "pipeline" / "adapter"  # under the runs folder, but no run's: `pipeline` prefixes an id
    stray.mkdir(parents=True)
    assert adapter_world(reg, str(stray)) is None
    played = reg.create_run("play", params={"env": "taxi"})
    trains = {"loss": "grpo", "rollouts_from": [played], "adapter": out["run_id"]}
    grpo_run = reg.create_run("actor", params=trains)
    assert adapter_world(reg, grpo_run) == (grpo_run, {"env": "taxi"})  # learned on its rollouts' world
    assert run_notes(reg, trains) == [f"note: adapter {out['run_id']} learned on grid (run {out['run_id']}); this "
                                      "run learns on taxi: its --pairs-from / --rollouts-from runs played there; "
                                      "runs of grid train where it learned"]
