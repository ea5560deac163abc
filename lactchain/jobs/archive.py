"""The trajectory archive's jobs (grid-only by nature: its trajectories are grid paths
on a scene): `archive fill` MAP-Elites style, and the run file every archive job writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lactchain.config import Config, ConfigError, option
from lactchain.jobs.checks import run_of_kind
from lactchain.jobs.output import LineLog
from lactchain.jobs.parts import SEED_MAX
from lactchain.jobs.spec import Job


def record_archive(handle: Any, rows: list[dict[str, Any]]) -> Path:
    """Store trajectory rows as this archive run's file and episodes (start, seed,
    return, length): what fill, add and import share."""
    from lactchain.archive import ARCHIVE_FILE, write_rows

    path = write_rows(handle.dir / ARCHIVE_FILE, rows)
    for i, row in enumerate(rows):
        rewards = row["rewards"]
        handle.registry.add_episode(handle.run_id, idx=i, seed=row["seed"], start_state=row["start"],
                                    return_=sum(rewards), length=len(row["actions"]),
                                    success=bool(rewards) and rewards[-1] > 0, moves_used=len(row["path"]) - 1)
    handle.registry.add_artifact(handle.run_id, "archive", path, meta={"elites": len(rows)})
    return path


def archive_artifact(registry: Any, run: Any) -> Path:
    """The archive file of an archive run (a one-line refusal when it has none)."""
    art = registry.latest_artifact(run["id"], "archive")
    if art is None or not Path(art["path"]).is_file():
        raise ConfigError(f"run {run['id']} ({run['kind']}) has no archive file; fill one with `lactchain archive "
                          "fill`")
    return Path(art["path"])


def load_archive(registry: Any, run: str, option_name: str = "RUN") -> tuple[str, list[dict[str, Any]]]:
    """(run id, trajectory rows) of an archive run; one-line refusals for a run without
    one or a file that is not an archive."""
    from lactchain.archive import read_rows

    found = run_of_kind(registry, option_name, run, ("archive",), "an archive run (lactchain archive fill)")
    art = archive_artifact(registry, found)
    try:
        return found["id"], read_rows(art)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass
class ArchiveFillConfig(Config):
    scene: str = option("flat", "The grid's scene (empty, flat).")
    behaviours: int = option(2000, "Trajectories to generate (random walks, the planner to random targets and "
                                   "through random landmark sequences, in turn).", short="-n", min=1,
                             max=10_000_000)
    max_landmarks: int = option(2, "Coverage counts BDs with at most this many landmarks.", min=0, max=6)
    seed: int = option(0, "Seed.", min=0, max=SEED_MAX)

    def check(self) -> None:
        from lactchain.envs.scenes import get_scene

        try:
            self.scene = get_scene(self.scene).name
        except ValueError as exc:
            self.refuse("scene", str(exc))

    def record_params(self) -> dict[str, Any]:
        return {**self.to_params(), "env": "grid"}


def run_fill(handle: Any, config: ArchiveFillConfig) -> dict[str, Any]:
    from lactchain.archive import fill, reachable_bds

    scene, behaviours = config.scene, config.behaviours
    line = LineLog()
    reachable = reachable_bds(scene, config.max_landmarks)
    line(f"archive fill: {behaviours} behaviours on {scene} ({len(reachable)} reachable BDs)", force=True)

    def on_progress(i: int, archive: Any) -> None:
        if i % 200 == 0 or i == behaviours:
            cov = archive.coverage(reachable)
            handle.log_metrics({"coverage": cov["coverage"], "elites": cov["elites"]}, step=i)
            line(f"{i}/{behaviours}: {cov['elites']} elites, coverage {cov['coverage']:.3f}")
            handle.check_cancelled()

    archive = fill(scene, behaviours, seed=config.seed, on_progress=on_progress)
    path = record_archive(handle, [{"key": key, **t.as_dict()} for key, t in archive.elites.items()])
    cov = archive.coverage(reachable)
    handle.log_metrics({f"final/{k}": float(v) for k, v in cov.items()})
    return {**cov, "by_source": archive.by_source, "archive": str(path)}


ARCHIVE_FILL = Job(kind="archive", command="archive fill", config=ArchiveFillConfig, run=run_fill,
                   title="Fill an archive", name=lambda c: f"archive {c.scene} x{c.behaviours}",
                   doc="""Fill an archive MAP-Elites style: one elite (the shortest) per behaviour descriptor
    (final cell + landmarks visited, in order); reports coverage = distinct BDs /
    reachable BDs (exact, by BFS over the scene).""")
