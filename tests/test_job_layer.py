"""The job layer: one table of jobs from which the CLI commands, the console's forms
and detached processes (`python -m lactchain.jobs KIND config.json`) are derived."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field

import pytest
import typer
from typer.testing import CliRunner

from lactchain.config import Config, ConfigError, flag_of, flat_fields, option
from lactchain.jobs.launch import CONFIG_FILE, load_config
from lactchain.jobs.table import BY_COMMAND, JOBS
from lactchain.runs.registry import Registry


def test_every_job_command_is_generated_from_its_config():
    """Each job's CLI options are exactly its config's command-line fields plus the common ones."""
    from lactchain.cli import command as cli_command

    group = cli_command()
    for job in JOBS.values():
        command = group
        for word in job.command.split():  # "baselines train": a sub-command of a group
            command = command.commands[word]
        options = {opt for p in command.params if p.param_type_name == "option" for opt in p.opts}
        arguments = {p.name for p in command.params if p.param_type_name == "argument"}
        mine = [f for _, f in flat_fields(job.config) if f.metadata.get("cli", True)]
        flags = [f for f in mine if flag_of(f).startswith("-")]
        wanted = {flag_of(f) for f in flags} | {f.metadata["short"] for f in flags if f.metadata.get("short")}
        assert wanted <= options, (job.command, wanted - options)
        assert options - wanted <= {"--db", "--detach", "--run-id", "--json"}, job.command
        assert arguments == {f.name for f in mine if not flag_of(f).startswith("-")}, job.command


def test_a_loop_commands_help_reads_by_topic(capsys, monkeypatch):
    """`pipeline --help` (66 options) lists them in panels: each option under its topic,
    the common ones in the main Options panel. Every field a HELP_PANELS table names
    exists (a renamed field would drop silently back into the main panel)."""
    import re

    from cli_helpers import run_cli

    for job in JOBS.values():
        names = {f.name for _, f in flat_fields(job.config)}
        for owner in {owner for owner, _ in flat_fields(job.config)}:
            for panel, listed in getattr(owner, "HELP_PANELS", {}).items():
                assert set(listed) <= names, (job.command, panel, set(listed) - names)
    monkeypatch.setenv("COLUMNS", "160")
    code, shown, err = run_cli(["pipeline", "--help"], capsys)
    assert code == 0, err
    panels = re.findall(r"^╭─ (.+?) ─", shown, flags=re.M)
    assert panels == ["Options", "World", "Collect and rank", "Critic", "Actor training", "GRPO", "SimPO, DPO, KTO",
                      "Generation engine", "Evaluation"]

    def panel_of(flag: str) -> str:
        at = re.search(rf"^│ {re.escape(flag)}\b", shown, flags=re.M)
        assert at, flag
        return [p for p in re.finditer(r"^╭─ (.+?) ─", shown, flags=re.M) if p.start() < at.start()][-1].group(1)

    assert panel_of("--loss") == panel_of("--db") == panel_of("--seed") == "Options"
    assert panel_of("--kl-beta") == panel_of("--grouping") == "GRPO"
    assert panel_of("--dtype") == panel_of("--constrained") == "Generation engine"
    assert panel_of("--explore") == "Collect and rank" and panel_of("--cpo-alpha") == "SimPO, DPO, KTO"


def test_a_new_config_field_shows_up_in_help_in_the_form_and_in_the_params(tmp_path):
    """Adding a field to a config is all it takes: --help lists it, the console's form
    shows it, a run records it and the detached config round-trips it."""
    from lactchain.cli.generate import make_command
    from tui.jobs_bridge import form_of

    base = BY_COMMAND["collect"]

    @dataclass
    class Wider(base.config):  # type: ignore[misc, valid-type]
        shuffle_hands: int = option(3, "Shuffle the hands this many times (a field added for the test).", min=1,
                                    form="Shuffles")

    seen: list[Wider] = []

    def run(handle, config):  # noqa: ANN001, ANN202
        seen.append(config)
        return {"shuffles": config.shuffle_hands}

    job = dataclasses.replace(base, config=Wider, run=run)
    app = typer.Typer()
    app.command("collect")(make_command(job))
    app.command("other")(lambda: None)
    runner = CliRunner()

    shown = runner.invoke(app, ["collect", "--help"], env={"COLUMNS": "200"})
    assert "--shuffle-hands" in shown.output and "a field added for the test" in shown.output

    assert [f.name for f in form_of(job).fields][-1] == "shuffle-hands"

    db = tmp_path / "registry.db"
    result = runner.invoke(app, ["collect", "--shuffle-hands", "5", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    assert seen and seen[0].shuffle_hands == 5
    with Registry(db) as reg:
        run_row = reg.list_runs()[0]
        assert reg.params(run_row["id"])["shuffle_hands"] == 5
        assert load_config(job, reg.run_dir(run_row["id"]) / CONFIG_FILE) == seen[0]

    refused = runner.invoke(app, ["collect", "--shuffle-hands", "0", "--db", str(db)])
    assert refused.exit_code != 0


def test_config_round_trip_and_one_line_refusals():
    config = BY_COMMAND["evaluate"].config.from_params({"actor": "tiny", "states": "12", "engine": "hf"})
    again = type(config).from_params(json.loads(json.dumps(config.to_params())))
    assert again == config and again.states == "12"
    for bad, words in (({"states": "0"}, "--states '0'"), ({"envs": 0}, "--envs 0: must be at least 1"),
                       ({"env": "chess"}, "--env 'chess': unknown env"), ({"temperature": float("nan")}, "unknown"),
                       ({"engine": "tgi"}, "--engine 'tgi': unknown engine 'tgi'")):
        with pytest.raises(ConfigError) as err:
            type(config).from_params(bad)
        assert words in str(err.value) and "\n" not in str(err.value)


@dataclass
class _Part(Config):
    beta: float | None = option(None, "beta", min=0.0)


@dataclass
class _Whole(Config):
    loss: str = option("simpo", "loss", choices=("simpo", "dpo"))
    lists: list[str] = option([], "lists")
    part: _Part = field(default_factory=_Part)


def test_nested_parts_are_flat_in_params():
    whole = _Whole.from_params({"loss": "dpo", "beta": 2, "lists": "a, b"})
    assert whole.part.beta == 2.0 and whole.lists == ["a", "b"]
    assert whole.to_params() == {"loss": "dpo", "lists": ["a", "b"], "beta": 2.0}
    with pytest.raises(ConfigError, match="--beta -1.0: must be at least 0"):
        _Whole.from_params({"beta": -1})


def _wait_done(db, run_id, timeout=120.0):
    end = time.time() + timeout
    while time.time() < end:
        with Registry.open_for_reading(db) as reg:
            run = reg.get_run(run_id)
        if run["status"] not in ("SCHEDULED", "RUNNING"):
            return run
        time.sleep(0.3)
    raise AssertionError(f"{run_id} still {run['status']} after {timeout} s")


@pytest.mark.slow
def test_every_job_kind_detaches_through_python_m_lactchain_jobs_and_resumes(tmp_path, capsys):
    """Each kind of the table runs detached as `python -m lactchain.jobs KIND config.json`,
    and `runs resume` starts the next run from the saved config."""
    from cli_helpers import run_cli

    db = tmp_path / "registry.db"

    def cli(*args):
        code, out, err = run_cli([*args, "--db", str(db)], capsys)
        assert code == 0, err
        return json.loads(out) if out.strip().startswith("{") else out

    def launch(*args):
        return cli(*args, "--detach", "--json")["run_id"]

    def finished(*run_ids):
        """Waits for detached runs launched together (independent jobs run side by side)."""
        for run_id in run_ids:
            run = _wait_done(db, run_id)
            log = (tmp_path / run_id / "log.txt").read_text()
            assert run["status"] == "FINISHED", log
            with Registry.open_for_reading(db) as reg:
                assert reg.get_run(run_id)["pid"]
            assert (tmp_path / run_id / CONFIG_FILE).exists()
        return run_ids if len(run_ids) > 1 else run_ids[0]

    play, collect, archive, *_ = finished(
        launch("play", "--actor", "tiny", "--episodes", "2", "--max-actions", "2"),
        launch("collect", "--episodes", "40"),
        launch("archive", "fill", "--scene", "empty", "--behaviours", "60"),
        launch("evaluate", "--actor", "tiny", "--states", "3", "--max-actions", "2"),
        launch("bandit", "--runs", "5", "--steps", "20", "--agents", "eps:0.1"),
        launch("baselines", "train", "--episodes", "20"))
    critic, judge, dt, _ = finished(
        launch("train-critic", "-e", play, "--critic", "tiny", "--epochs", "1", "--batch-size", "2"),
        launch("judge", "--from", collect, "--pairs", "10"),
        launch("dt", "train", "--archive", archive, "--steps", "4", "--n-layer", "1", "--n-head", "2", "--n-embd",
               "16", "--eval-every", "2", "--checkpoint-every", "2", "--select-fraction", "0"),
        launch("judge", "--from", play, "--pairs", "1", "--pairing", "random"))
    _, reward, _ = finished(
        launch("collect-pairs", "--actor", "tiny", "--critic-run", critic, "--states", "2", "--samples", "2"),
        launch("train-reward", "--pairs-from", judge, "--critic", "tiny", "--epochs", "2"),
        launch("dt", "eval", dt, "--limit", "2", "--goal-starts", "2"))
    finished(launch("reward-agents", "--reward-run", reward, "--train-episodes", "200", "--eval-episodes", "200"))
    assert {"play", "evaluate", "train-critic", "collect-pairs", "collect", "judge", "train-reward", "reward-agents", "bandit", "baselines train", "archive fill", "dt train", "dt eval"} <= set(JOBS)

    with Registry(db) as reg:  # a judge run that died: resumed from its saved config
        reg.update_run(judge, status="FAILED")
    resumed = cli("runs", "resume", judge, "--json")["run_id"]
    assert _wait_done(db, resumed)["status"] == "FINISHED"
    with Registry.open_for_reading(db) as reg:
        assert reg.params(resumed)["resume_from"] == judge
        assert reg.get_run(resumed)["parent_id"] == judge
        assert len(reg.pairs(resumed)) == 0  # every pair of the lineage was already labelled


def test_dtype_auto_means_the_same_in_the_loop_in_play_and_in_vllm():
    """`--dtype auto` is this machine's fastest generation dtype wherever it is given
    (the loop's default, a play/evaluate job, the transformers actor, a vLLM engine),
    and a run records the dtype that ran, never `auto`."""
    import torch

    from lactchain.engine import EngineConfig
    from lactchain.jobs.rollouts import PlayConfig
    from lactchain.loop.config import PipelineConfig
    from lactchain.machine import fast_generation_dtype
    from lactchain.models.actor import as_dtype
    from lactchain.models.vllm_single import EngineSettings, engine_config

    fast = fast_generation_dtype()
    assert PipelineConfig().engine.dtype == fast == PipelineConfig(engine={"dtype": "auto"}).params()["dtype"]
    assert EngineConfig(dtype="auto").dtype == fast == PlayConfig(engine={"dtype": "auto"}).engine.dtype
    assert as_dtype("auto") == getattr(torch, fast)
    assert engine_config("m", EngineSettings(dtype="auto"))["dtype"] == fast
    # play, evaluate, collect-pairs and strategy search generate as the loop does by default;
    # a config saved before auto was their default (dtype null) keeps the weights' dtype.
    assert EngineConfig().dtype == fast and EngineConfig().params() == {"engine": "hf", "dtype": fast}
    old = PlayConfig.from_params({**PlayConfig().to_params(), "dtype": None})
    assert old.engine.dtype is None and as_dtype(None) is None and old.engine.params() == {}
    with pytest.raises(ConfigError, match="--dtype 'int8': unknown dtype; use one of auto"):
        EngineConfig(dtype="int8")


def test_the_loop_engine_is_the_jobs_engine_part_and_reads_old_configs(lc, capsys):
    """The pipeline's --engine/--dtype/--*-parallel-size are the jobs' engine part (one
    set of checks, one loader); a config saved before (engine string + rollout_bf16)
    still reads, so `runs resume` of an older pipeline run keeps working."""
    import torch

    from lactchain.engine import EngineConfig
    from lactchain.loop.config import PipelineConfig
    from lactchain.loop.pipeline import load_loop_actor

    from lactchain.machine import fast_generation_dtype

    cfg = PipelineConfig()  # auto: the dtype this machine generates fastest in, recorded as such
    assert isinstance(cfg.engine, EngineConfig) and cfg.engine.dtype == fast_generation_dtype()
    assert cfg.params()["dtype"] in ("bfloat16", "float32")
    assert {"engine", "dtype", "tensor_parallel_size", "data_parallel_size"} <= set(cfg.params())
    old = PipelineConfig.from_params({"engine": "hf", "rollout_bf16": False, "actor": "tiny"})
    assert (old.engine.engine, old.engine.dtype) == ("hf", "float32")
    assert PipelineConfig.from_params(cfg.params()) == cfg

    fp32 = load_loop_actor(PipelineConfig(actor="tiny", engine={"dtype": "float32"}))
    bf16 = load_loop_actor(PipelineConfig(actor="tiny", engine={"dtype": "bfloat16"}))
    assert fp32.inference_dtype in (None, torch.float32) and bf16.inference_dtype == torch.bfloat16

    capsys.readouterr()
    code, _, err = lc("pipeline", "--actor", "tiny", "--dtype", "int8")
    assert code != 0 and "--dtype" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, _, err = lc("pipeline", "--actor", "tiny", "--engine", "hf", "--data-parallel-size", "2")
    assert code != 0 and "--data-parallel-size 2" in err and "vllm" in err and "Traceback" not in err


def test_a_detached_job_given_another_worlds_adapter_says_so_where_it_was_started(tmp_path, capsys):
    """The start notes (an adapter whose actor learned elsewhere) were said only in the
    child's log: `--detach` says them on the terminal that started it, and the console's
    launch hands them back for a toast."""
    from cli_helpers import run_cli

    from lactchain.bench.rollout import random_adapter
    from tui.jobs_bridge import JobRequest, launch_job

    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        taxi = reg.create_run("pipeline", params={"actor": "tiny", "env": "taxi"})
        reg.add_artifact(taxi, "adapter", random_adapter("tiny", reg.run_dir(taxi) / "adapter"))
    note = f"note: adapter {taxi} learned on taxi (run {taxi}); this run plays grid: pass --env taxi"
    code, out, err = run_cli(["evaluate", "--actor", "tiny", "--adapter", taxi, "--states", "2", "--detach",
                              "--json", "--db", db], capsys)
    assert code == 0, err
    assert note in " ".join(err.split())
    started = launch_job(JobRequest("evaluate", {"actor": "tiny", "adapter": taxi, "states": "2"}, db))
    assert [n.split(" to play")[0] for n in started.notes] == [note]
    for run_id in (json.loads(out)["run_id"], started.run_id):
        assert _wait_done(db, run_id)["status"] == "FINISHED"


def test_grpo_rollouts_of_one_world_however_recorded_and_a_mix_refused(tmp_path):
    """GRPO samples the states its --rollouts-from runs visited: runs of the default grid,
    with or without `--scene empty`, are one world; a Taxi run among them is a one-line
    refusal naming both worlds."""
    from lactchain.jobs.training import rollouts_world

    with Registry(tmp_path / "registry.db") as reg:
        plain, named, taxi = (reg.create_run("play", params=params) for params in
                              ({"env": "grid"}, {"env": "grid", "scene": "empty"}, {"env": "taxi"}))
        assert rollouts_world(reg, [plain, named]) == {"env": "grid", "scene": None, "state_text": "egocentric"}
        with pytest.raises(ConfigError, match=r"the runs played different worlds \(grid; taxi\)"):
            rollouts_world(reg, [plain, taxi])
