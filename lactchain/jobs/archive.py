"""The trajectory archive's jobs (grid-only by nature: its trajectories are grid paths
on a scene): `archive fill` MAP-Elites style, and the run file every archive job writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lactchain.config import SEED_MAX, Config, ConfigError, option
from lactchain.envs.scenes import get_scene
from lactchain.jobs.checks import run_of_kind
from lactchain.jobs.output import LineLog
from lactchain.jobs.spec import Job


def record_archive(handle: Any, rows: list[dict[str, Any]]) -> Path:
    """Store trajectory rows as this archive run's file and episodes (start, seed,
    return, length): what fill, add and import share."""
    from lactchain.archive.store import ARCHIVE_FILE, write_rows

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
    from lactchain.archive.store import read_rows

    found = run_of_kind(registry, option_name, run, ("archive",), "an archive run (lactchain archive fill)")
    art = archive_artifact(registry, found)
    try:
        return found["id"], read_rows(art)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass
class ArchiveFillConfig(Config):
    scene: str = option("flat", "The grid's scene: a bundled one (empty, flat, rooms, maze) or a scene JSON file.")
    behaviours: int = option(2000, "Trajectories to generate (random walks, the planner to random targets and "
                                   "through random landmark sequences, in turn).", short="-n", min=1,
                             max=10_000_000)
    max_landmarks: int = option(2, "Coverage counts BDs with at most this many landmarks.", min=0, max=6)
    seed: int = option(0, "Seed.", min=0, max=SEED_MAX)

    def check(self) -> None:
        try:
            self.scene = get_scene(self.scene).name
        except ValueError as exc:
            self.refuse("scene", str(exc))

    def record_params(self) -> dict[str, Any]:
        return {**self.to_params(), "env": "grid"}


def run_fill(handle: Any, config: ArchiveFillConfig) -> dict[str, Any]:
    from lactchain.archive.store import fill, reachable_bds

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


@dataclass
class ArchiveAddConfig(Config):
    sources: list[str] = option([], "Play runs (ids or unique prefixes) on the grid, e.g. an LLM actor's `lactchain "
                                    "play --scene flat --start random`.", flag="RUN")
    into: str | None = option(None, "An archive run to merge into (it stays as it was: the merge is a new archive "
                                    "run).")
    max_landmarks: int = option(2, "Coverage counts BDs with at most this many landmarks.", min=0, max=6)
    scene: str | None = option(None, "The scene the runs played (found from them).", cli=False)

    def check(self) -> None:
        if not self.sources:
            self.refuse("sources", "give at least one play run")

    def record_params(self) -> dict[str, Any]:
        return {**self.to_params(), "env": "grid"}


def _prepare_add(registry: Any, config: ArchiveAddConfig) -> dict[str, Any]:
    """Play runs on the grid, all on one scene (with the archive merged into)."""
    sources = [run_of_kind(registry, "RUN", spec, ("play",), "a play run (lactchain play)")["id"]
               for spec in config.sources]
    scenes = set()
    for rid in sources:
        params = registry.params(rid)
        if params.get("env", "grid") != "grid":
            raise ConfigError(f"run {rid} played {params.get('env')}; the archive holds grid trajectories (play --env "
                              "grid)")
        scenes.add(params.get("scene") or "empty")
    if config.into is not None:
        target = run_of_kind(registry, "--into", config.into, ("archive",), "an archive run (lactchain archive fill)")
        scenes.add(registry.params(target["id"]).get("scene") or "empty")
        load_archive(registry, target["id"])
        config.into = target["id"]
    if len(scenes) > 1:
        raise ConfigError(f"the runs are on different scenes ({', '.join(sorted(scenes))}); archive one scene at a "
                          "time")
    config.sources, config.scene = sources, scenes.pop()
    return {"sources": sources, "scene": config.scene, "into": config.into}


def run_add(handle: Any, config: ArchiveAddConfig) -> dict[str, Any]:
    from lactchain.archive.store import coverage, from_episode, merge, reachable_bds

    base = load_archive(handle.registry, config.into)[1] if config.into else []
    new, skipped = [], []
    for rid in config.sources:
        run_params = handle.registry.params(rid)
        steps_by_episode: dict[int, list[dict[str, Any]]] = {}
        for step in handle.registry.steps(run_id=rid):
            steps_by_episode.setdefault(step["episode_id"], []).append(step)
        for episode in handle.registry.episodes(rid):
            steps = steps_by_episode.get(episode["id"], [])
            if not steps or not steps[-1].get("done"):
                skipped.append(f"{rid} episode {episode['idx']}: unfinished")
                continue
            try:
                new.append(from_episode(episode, steps, run_params, rid))
            except (ValueError, KeyError, TypeError, IndexError) as exc:  # a step the replay cannot follow
                skipped.append(f"{rid} episode {episode['idx']}: {exc}")
    rows, stats = merge(base, new)
    path = record_archive(handle, rows)
    cov = coverage({r["key"] for r in rows}, reachable_bds(config.scene, config.max_landmarks), stats["offered"])
    handle.log_metrics({f"final/{k}": float(v) for k, v in cov.items()})
    return {**cov, **stats, "skipped": skipped, "archive": str(path)}


ARCHIVE_ADD = Job(kind="archive", command="archive add", config=ArchiveAddConfig, run=run_add, title="Archive play runs",
                  name=lambda c: f"archive add {' '.join(c.sources)}", prepare=_prepare_add, detachable=False,
                  doc="""Archive play runs: each finished episode is replayed from its start (every transition
    checked against the run's steps) and offered to the archive, one elite per BD (the
    shortest); the policy (actor, adapter, strategy version, sampling) goes with it.""")


@dataclass
class ArchiveImportConfig(Config):
    directory: str = option("", "A folder written by `lactchain archive export` (or a copy of it, e.g. a Hub "
                                "download).", flag="DIR")
    allow_unverified: bool = option(False, "Import even when some trajectories do not replay as stored (they are "
                                           "kept, and `lactchain archive verify` lists them). Default: refuse.")
    scene: str | None = option(None, "The dataset's scenes (read from its manifest).", cli=False)

    def check(self) -> None:
        if not self.directory:
            self.refuse("directory", "give the folder of an exported archive dataset")
        self.directory = str(Path(self.directory).expanduser().absolute())  # a detached job may start elsewhere


def _checked_import(config: ArchiveImportConfig) -> tuple[dict[str, Any], list[dict[str, Any]], list[tuple]]:
    """(manifest, rows, mismatches) of the dataset, every trajectory replayed; refused in
    one line when it is broken, or does not replay and --allow-unverified is not given.
    Kept on the config, so a foreground import replays once (a detached one reads its
    config from JSON and checks again, in its own process)."""
    checked = getattr(config, "_checked", None)
    if checked is not None:
        return checked
    from lactchain.archive.dataset import load_export
    from lactchain.archive.trajectories import Trajectory, verify

    try:
        manifest, rows = load_export(Path(config.directory))
    except ValueError as exc:
        raise ConfigError(f"{exc}; nothing was imported") from None
    mismatches = []
    for i, row in enumerate(rows):
        try:
            problem = verify(Trajectory.from_dict(row))
        except (ValueError, TypeError, KeyError) as exc:
            problem = exc
        if problem is not None:
            mismatches.append((i, row.get("key"), str(problem)))
    if mismatches and not config.allow_unverified:
        i, key, problem = mismatches[0]
        raise ConfigError(f"{len(mismatches)} of {len(rows)} trajectories in {config.directory} do not replay as "
                          f"stored (first: row {i} {key}: {problem}); the dataset is corrupted: export it again, or "
                          "pass --allow-unverified; nothing was imported")
    config._checked = (manifest, rows, mismatches)
    return config._checked


def _prepare_import(registry: Any, config: ArchiveImportConfig) -> dict[str, Any]:
    manifest, rows, mismatches = _checked_import(config)
    config.scene = ",".join(manifest.get("scenes") or []) or None
    return dict(source_dir=config.directory, source_run=manifest.get("source_run"), sha256=manifest["sha256"],
                trajectories=len(rows), verified=len(rows) - len(mismatches),
                scene=",".join(manifest.get("scenes") or []),
                env=",".join(sorted({str(r.get("env")) for r in rows})))


def run_import(handle: Any, config: ArchiveImportConfig) -> dict[str, Any]:
    manifest, rows, mismatches = _checked_import(config)
    verified = len(rows) - len(mismatches)
    path = record_archive(handle, rows)
    handle.log_metrics({"final/elites": float(len(rows)), "final/verified": float(verified)})
    return {"trajectories": len(rows), "verified": verified,
            "unverified": [{"index": i, "key": k, "problem": p} for i, k, p in mismatches],
            "source_dir": config.directory, "source_run": manifest.get("source_run"), "archive": str(path)}


ARCHIVE_IMPORT = Job(kind="archive", command="archive import", config=ArchiveImportConfig, run=run_import,
                     title="Import an archive dataset", name=lambda c: f"archive {c.scene or '?'} import", prepare=_prepare_import,
                     doc="""Import an exported archive dataset as a new archive run. Everything is checked
    first: the manifest, the Parquet file's sha256 and row count, the columns, every
    row's scene and landmarks, and every trajectory replayed from its start; only then is
    the run created (its params name the source folder and the source run). A truncated,
    altered or foreign dataset is refused in one line and changes nothing.""")
