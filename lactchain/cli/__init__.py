"""`lactchain`: the command line. Each command group lives in its own module."""

from __future__ import annotations

import functools

import click
import typer

from lactchain.cli import env_cmd
from lactchain.safe_text import printable

app = typer.Typer(
    name="lactchain",
    help="LactChain lab: train LLMs as reinforcement-learning policies (GridWorld and its scenes, Blackjack, Taxi), with LLM-judged rewards, a trajectory archive and classic baselines.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,
)
app.add_typer(env_cmd.app, name="env")


def _register_optional_groups() -> None:
    """Groups added by later modules register here, so one import list stays the truth."""
    from lactchain.cli import (actor_cmd, archive_cmd, archive_dataset_cmd, archive_describe_cmd, bandit_cmd,
                               baselines_cmd, bench_cmd, critic_cmd, dt_cmd, loop_cmd, models_cmd,
                               motif_cmd, pipeline_cmd, play_cmd, runs_cmd, strategy_cmd)

    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import BY_COMMAND

    app.add_typer(runs_cmd.app, name="runs")
    app.command("play")(make_command(BY_COMMAND["play"], render=play_cmd.render_summary))
    app.add_typer(models_cmd.app, name="models")
    app.command("train-critic")(make_command(BY_COMMAND["train-critic"], render=critic_cmd.render_summary))
    app.command("collect-pairs")(make_command(BY_COMMAND["collect-pairs"],
                                              render=lambda r: loop_cmd.result_table(f"collect-pairs {r['run_id']}", r)))
    app.command("train-actor")(make_command(BY_COMMAND["train-actor"], render=actor_cmd.render_summary))
    app.command("evaluate")(make_command(BY_COMMAND["evaluate"],
                                         render=lambda r: loop_cmd.result_table(f"evaluate {r['run_id']}", r)))
    app.command("pipeline")(make_command(BY_COMMAND["pipeline"], render=pipeline_cmd.render_pipeline))
    bench_cmd.app.command("bandit")(bandit_cmd.bench_bandit)
    app.add_typer(bench_cmd.app, name="bench")
    for command in ("collect", "judge", "train-reward"):
        app.command(command)(make_command(BY_COMMAND[command], render=motif_cmd.render_table(command)))
    app.command("reward-agents")(make_command(BY_COMMAND["reward-agents"], render=motif_cmd.render_agents))
    app.command("bandit")(make_command(BY_COMMAND["bandit"], render=bandit_cmd.render_table))
    baselines_cmd._register_train()
    app.add_typer(baselines_cmd.app, name="baselines")
    app.command("leaderboard")(baselines_cmd.leaderboard_cmd)
    archive_cmd._register_fill()
    app.add_typer(archive_cmd.app, name="archive")
    dt_cmd._register()
    app.add_typer(dt_cmd.app, name="dt")
    archive_cmd.app.command("annotate")(archive_describe_cmd.annotate_cmd)
    archive_cmd.app.command("describe")(archive_describe_cmd.describe_cmd)
    archive_cmd.app.command("export")(archive_dataset_cmd.export_cmd)
    archive_cmd.app.command("import")(archive_dataset_cmd._register_import())
    strategy_cmd._register()
    app.add_typer(strategy_cmd.app, name="strategy")


def _one_line_short_helps(typer_app: typer.Typer) -> None:
    """A command's line in its group's listing is its help's first paragraph as one line
    (rich help keeps a docstring's line breaks, which broke the listing mid-sentence)."""
    import inspect

    for info in typer_app.registered_commands:
        doc = info.help or inspect.getdoc(info.callback) or ""
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _one_line_short_helps(group.typer_instance)


_register_optional_groups()
_one_line_short_helps(app)


@functools.cache
def command() -> click.Command:
    """`app` as the click command that parses argv, built once per process. Typer builds it
    anew on every call of `app(...)`: ~50-90 ms for this CLI, paid by every in-process
    caller (the test suite makes ~1,000 such calls; a `lactchain` process makes one)."""
    return typer.main.get_command(app)


def main() -> None:
    """Bad input (a missing model, a file that is not a registry, a bad value) ends in
    one line on stderr and exit code 2, not a traceback; LACTCHAIN_DEBUG=1 shows it."""
    import os
    import sqlite3
    import sys

    from lactchain.machine import calm_omp_threads
    from lactchain.paths import disk_fault

    calm_omp_threads()

    try:
        code = command()(standalone_mode=False)
    except typer.TyperException as exc:  # a bad option value, an unknown option, a missing argument
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        sys.stderr.write(f"error: {printable(' '.join(exc.format_message().split()))}{printable(hint)}\n")
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except (ValueError, KeyError, OSError, sqlite3.DatabaseError) as exc:
        if os.environ.get("LACTCHAIN_DEBUG"):
            raise
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            from lactchain.runs.registry import BUSY_TIMEOUT_S

            message = (f"the registry is locked by another process (waited {BUSY_TIMEOUT_S:g} s for its write "
                       "to end); try again when it is done")
        elif isinstance(exc, sqlite3.OperationalError) and "disk I/O error" in str(exc):
            message = ("the registry hit a disk I/O error: a full disk, a file size limit, or its -wal file "
                       "deleted while a job writes? free space (or wait a few seconds for the job to restore "
                       "its -wal), then run the command again")
        elif isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc):
            message = (f"the registry cannot be written ({message}): free space on its disk, then run the "
                       "command again (`lactchain runs resume` for a run that was stopped)")
        elif isinstance(exc, sqlite3.DatabaseError):
            message = f"the registry database cannot be read ({message}): check --db or $LACTCHAIN_DB"
        if isinstance(exc, OSError) and not str(message).startswith("could not write"):
            message = disk_fault(exc) or message
        sys.stderr.write(f"error: {printable(' '.join(str(message).split()))}\n")
        sys.exit(2)
    except RuntimeError as exc:  # a trainer's own checkpoint refused by a full disk, deep inside torch
        message = disk_fault(exc)
        if message is None or os.environ.get("LACTCHAIN_DEBUG"):
            raise
        sys.stderr.write(f"error: {printable(message)}\n")
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
