"""Labelling: a queue of preference pairs to label by hand.

Each pair shows its start state, both move lists (A and B) with the path each
produces on a small grid, in the scene the pair was collected in (its run's `scene`
param: landmarks and walls drawn; on another env, e.g. Blackjack, what each list did on the
pair's first deal, in the env's own captions), and the critic's scores (h hides
them, to label blind).
A judged caption pair (from `lactchain judge`: two whole episodes, e.g. Blackjack
hands) shows both captions and the judge's choice with its raw answer, which a
person can overrule; the progress line shows how often humans agreed with each
labeler (critic, llm judge) so far.
a / b pick the better list, t marks a tie, n skips, u undoes. Every label is
written to the registry at once (labeler "human"):

* a pair waiting for a human (labeler human, status pending) is labelled in place;
* a pair labelled by the critic or a judge gets a new human pair row (run of kind
  "labels", one per TUI session) with meta {"source_pair": id}, and the source
  pair's meta records the human verdict (its own status is left alone so the
  critic's dataset does not change under a training job).

Which list is A is decided by a hash of the pair id, so the position never gives
away the critic's choice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import ProgressBar, Static

from lactchain.envs.catalog import DEFAULT_ENV, EnvState, env_class, env_of_state, make_env
from lactchain.moves import format_moves
from lactchain.runs.registry import now_ms
from tui.commands import bindings_for
from tui.screens.base import BaseScreen
from tui.format import short_state
from tui.widgets.grid import GridModel, GridView, fit_cell_width
from tui.widgets.topbar import TopBar
from tui.widgets.footer import FittedFooter

SOURCE_LABELERS = ("critic", "llm", "episodes")


def state_text(value: Any, env: str | None) -> str:
    """A stored state in the env's own words (the raw dict when the env cannot read it)."""
    if env:
        try:
            return str(make_env(env).parse_state(value))
        except (ValueError, TypeError, KeyError):
            pass
    return str(value)


def _pair_env(pair: dict) -> str:
    """Which env a pair's start state belongs to (the default env when it cannot tell)."""
    meta = pair.get("meta") if isinstance(pair.get("meta"), dict) else {}
    if meta.get("env"):
        return str(meta["env"])
    try:
        return env_of_state(pair.get("state"))
    except ValueError:
        return DEFAULT_ENV


def pair_scenes(reg: Any, pairs: list[dict]) -> dict[str, Any]:
    """run id -> the scene its pairs were collected in (the run's `scene` param: a bundled
    name or a scene file), for the runs that recorded one."""
    out: dict[str, Any] = {}
    for run_id in {p.get("run_id") for p in pairs if p.get("run_id")}:
        try:
            scene = (reg.params(run_id) or {}).get("scene")
        except Exception:  # noqa: BLE001 - a run without params: the env's default scene
            continue
        if scene:
            out[run_id] = scene
    return out


def _caption_of(env: str, state: Any, moves: list[str], seed: int | None) -> tuple[str, float]:
    """What `moves` did from `state` on deal `seed`, in the env's caption."""
    text_env = make_env(env)
    text_env.reset(seed=seed, options={"state": state})
    _, reward, _, _, info = text_env.step(list(moves))
    return str(info.get("caption", "")), float(reward)


def a_is_chosen(pair_id: Any) -> bool:
    """Stable, unbiased-looking A/B assignment per pair."""
    return hashlib.sha1(str(pair_id).encode()).digest()[0] % 2 == 0


@dataclass
class Item:
    pair: dict
    a: list[str]
    b: list[str]
    a_score: float | None
    b_score: float | None
    in_place: bool  # a pending human pair: label it in place
    scene: Any = None  # the grid's scene the pair was collected in (None: the env's default)

    @property
    def captions(self) -> bool:
        """A judged pair of episode captions (text), not of move lists."""
        return isinstance(self.a, str)

    @classmethod
    def from_pair(cls, pair: dict, scene: Any = None) -> "Item":
        chosen, rejected = _side(pair.get("chosen")), _side(pair.get("rejected"))
        cs, rs = pair.get("chosen_score"), pair.get("rejected_score")
        in_place = pair.get("status") == "pending"
        if in_place or a_is_chosen(pair["id"]):
            return cls(pair, chosen, rejected, cs, rs, in_place, scene)
        return cls(pair, rejected, chosen, rs, cs, in_place, scene)


@dataclass
class Done:
    """One undoable step: a label written to the registry, or a skip."""

    index: int
    kind: str  # "label" | "skip"
    new_pair_id: int | None = None  # the human row we added
    source_before: dict = field(default_factory=dict)  # fields of the source pair before we changed it
    choice: str = ""  # "A", "B" or "tie" for a label


def _side(value: Any) -> list[str] | str:
    """One side of a pair: a move list, or a caption (judged episodes)."""
    return value if isinstance(value, str) else list(value or [])


def agreement_by_labeler(reg: Any) -> dict[str, tuple[int, int]]:
    """labeler -> (human labels agreeing with it, human labels of its pairs), ties excluded."""
    out: dict[str, list[int]] = {}
    for p in reg.pairs(labeler="human", status="labeled"):
        meta = p.get("meta") if isinstance(p.get("meta"), dict) else {}
        if meta.get("undone") or meta.get("agrees_with_source") is None:
            continue
        counts = out.setdefault(str(meta.get("source_labeler")), [0, 0])
        counts[0] += bool(meta["agrees_with_source"])
        counts[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def build_queue(reg: Any) -> tuple[list[dict], int]:
    """Pairs still waiting for a human, oldest first; and how many a human already labelled."""
    human = reg.pairs(labeler="human")
    done_sources = set()
    labelled = 0
    for p in human:
        meta = p.get("meta") or {}
        if isinstance(meta, dict) and meta.get("undone"):
            continue
        if p.get("status") in ("labeled", "tie"):
            labelled += 1
        if isinstance(meta, dict) and meta.get("source_pair") is not None and p.get("status") in ("labeled", "tie"):
            done_sources.add(meta["source_pair"])
    queue = [p for p in human if p.get("status") == "pending"]
    for p in reg.pairs(labeler=list(SOURCE_LABELERS), status="labeled"):
        if p["id"] in done_sources:
            continue
        if _side(p.get("chosen")) == _side(p.get("rejected")):
            continue
        queue.append(p)
    queue.sort(key=lambda p: p["id"])
    return queue, labelled


def write_label(reg: Any, item: Item, choice: str, session_run: str | None, blind: bool) -> tuple[str | None, Done]:
    """Write one human label (choice "A", "B" or "tie"); returns (session run id, undo record)."""
    pair = item.pair
    if choice == "B":
        chosen, rejected, cs, rs = item.b, item.a, item.b_score, item.a_score
    else:
        chosen, rejected, cs, rs = item.a, item.b, item.a_score, item.b_score
    status = "tie" if choice == "tie" else "labeled"
    meta_old = dict(pair.get("meta") or {}) if isinstance(pair.get("meta"), dict) else {}
    verdict = {"choice": choice, "blind": blind, "shown_as": {"A": item.a, "B": item.b}}
    if item.in_place:
        before = {k: pair.get(k) for k in ("chosen", "rejected", "chosen_score", "rejected_score", "status", "labeler")}
        before["meta"] = pair.get("meta")
        reg.update_pair(pair["id"], chosen=chosen, rejected=rejected, chosen_score=cs, rejected_score=rs,
                        status=status, labeler="human", meta={**meta_old, **verdict})
        return session_run, Done(-1, "label", None, before)
    if session_run is None:
        # A labelling session is a container for labels, not a job: no process to watch
        # (the reaper would call it dead), and every label is committed on its key press.
        # So it is FINISHED from its first label on, its end time following the last label.
        session_run = reg.create_run("labels", name="human labels (TUI)", params={"labeler": "human"})
        reg.update_run(session_run, status="FINISHED", started_ms=now_ms())
    source_labeler = pair.get("labeler")
    agrees = None if choice == "tie" else (chosen == _side(pair.get("chosen")))
    row = {
        "state": pair.get("state"), "prompt": pair.get("prompt"), "chosen": chosen, "rejected": rejected,
        "chosen_score": None, "rejected_score": None, "labeler": "human", "status": status,
        "meta": {"source_pair": pair["id"], "source_labeler": source_labeler, "agrees_with_source": agrees,
                 **verdict},
    }
    new_id = reg.add_pairs(session_run, [row])[0]
    reg.update_run(session_run, ended_ms=now_ms())
    reg.update_pair(pair["id"], meta={**meta_old, "human_pair": new_id, "human_choice": choice,
                                      "human_agrees": agrees})
    return session_run, Done(-1, "label", new_id, {"meta": pair.get("meta")})


def undo_label(reg: Any, item: Item, done: Done) -> None:
    pair = item.pair
    if done.new_pair_id is not None:
        deleter = getattr(reg, "delete_pair", None)
        if callable(deleter):
            deleter(done.new_pair_id)
        else:  # no delete in the registry: retract the row instead
            row = reg.get_pair(done.new_pair_id)
            meta = dict(row.get("meta") or {})
            reg.update_pair(done.new_pair_id, status="skipped", meta={**meta, "undone": True})
    reg.update_pair(pair["id"], **done.source_before)


class LabellingScreen(BaseScreen):
    BINDINGS = bindings_for("labels")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.queue: list[Item] = []
        self.index = 0
        self.history: list[Done] = []
        self.labelled_before = 0
        self.labelled_now = 0
        self.skipped = 0
        self.blind = False
        self.agreement: dict[str, tuple[int, int]] = {}  # source labeler -> (human agreed, human labelled)
        self._env = make_env(DEFAULT_ENV)  # replays grid pairs on the GridViews (see `_grid_env`)
        self._env_key: tuple[str, str | None] = (self._env.name, None)  # (env, scene) of `_env`
        self._loaded = False

    def compose(self) -> ComposeResult:
        yield TopBar("labels", id="topbar")
        with Horizontal(id="label-progress-row"):
            yield Static("loading pairs…", id="label-progress")
            yield ProgressBar(total=1, show_eta=False, id="label-bar")
        yield Static("", id="label-state")
        with Horizontal(id="label-main"):
            for side in ("a", "b"):
                with Vertical(id=f"label-{side}", classes="label-side"):
                    yield GridView(id=f"label-grid-{side}", cell_width=5, interactive=False)
                    yield Static("", id=f"label-moves-{side}")
        yield Static("", id="label-help")
        yield FittedFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#label-a").border_title = "A"
        self.query_one("#label-b").border_title = "B"
        self.query_one("#label-help", Static).update(Text(
            "a: A is better · b: B is better · t: tie · n: skip · u: undo · h: hide/show critic scores", style="dim"))
        self.load_queue()

    def on_screen_resume(self) -> None:
        if self._loaded and self.index >= len(self.queue):
            self.load_queue()

    @work(exclusive=True, group="labels-queue", exit_on_error=False, name="load pairs")
    async def load_queue(self) -> None:
        try:
            def gather(reg: Any) -> tuple[list[dict], int, dict, dict]:
                pairs, labelled = build_queue(reg)
                return pairs, labelled, agreement_by_labeler(reg), pair_scenes(reg, pairs)

            pairs, labelled, agreement, scenes = await self.app.registry.call(gather)
        except Exception as exc:  # noqa: BLE001
            self.query_one("#label-progress", Static).update(Text(f"registry unavailable: {exc}", style="red"))
            return
        self.queue = [Item.from_pair(p, scenes.get(p.get("run_id"))) for p in pairs]
        self.index, self.history, self.skipped, self.labelled_now = 0, [], 0, 0
        self.labelled_before = labelled
        self.agreement = agreement
        self._loaded = True
        self.show()

    @property
    def current(self) -> Item | None:
        return self.queue[self.index] if 0 <= self.index < len(self.queue) else None

    def _grid_env(self, env: str, scene: Any = None) -> Any:
        """The env a pair drawn on the GridViews is replayed in, in the pair's scene (kept
        while pairs share both); a ValueError when the scene cannot be read (a scene file gone)."""
        scene = scene if scene and getattr(env_class(env), "has_scenes", False) else None
        key = (env, json.dumps(scene, sort_keys=True, default=str) if scene is not None else None)
        if self._env_key != key:
            self._env = make_env(env, scene=scene) if scene is not None else make_env(env)
            self._env_key = key
        return self._env

    def _path(self, start: EnvState, moves: list[str]) -> tuple[EnvState, float, tuple[EnvState, ...]]:
        env = self._env
        env.reset(options={"state": start.as_dict()})
        _, reward, _, _, _ = env.step(moves)
        return env.state, float(reward), tuple(env.path)

    def show(self) -> None:
        total = len(self.queue)
        done = min(self.index, total)
        progress = Text()
        progress.append(f" pair {min(self.index + 1, total)}/{total}" if total else " no pairs to label", style="bold")
        if self.blind:  # the mode first: at 80 columns the line's end wraps out of view
            progress.append(" · BLIND", style="bold magenta")
        if self.app.label_runs:  # where the labels went, and where to train on them: never cut off
            progress.append(f" · labels in {', '.join(self.app.label_runs)} (4 Jobs ▸ Train actor: pre-filled)",
                            style="bold")
        progress.append(f" · labelled {self.labelled_now} · skipped {self.skipped}"
                        f" · human labels {self.labelled_before + self.labelled_now}", style="dim")
        for labeler, (agree, n) in sorted(self.agreement.items()):
            progress.append(f" · agrees with {labeler} {agree}/{n}", style="dim")
        self.query_one("#label-progress", Static).update(progress)
        self.query_one("#label-bar", ProgressBar).update(total=max(total, 1), progress=done)
        item = self.current
        if item is None:
            msg = "All pairs are labelled. Collect more with a collect-pairs job (4 Jobs)." if total else (
                "No pairs waiting for a label: run collect-pairs (4 Jobs), then come back.")
            self.query_one("#label-state", Static).update(Text(msg, style="italic"))
            for side in ("a", "b"):
                self.query_one(f"#label-grid-{side}", GridView).model = GridModel()
                self.query_one(f"#label-moves-{side}", Static).update("")
            return
        for side in ("a", "b"):
            self.query_one(f"#label-grid-{side}", GridView).display = not item.captions
        if item.captions:
            self._show_captions(item)
            return
        pair = item.pair
        env = _pair_env(pair)
        if env_class(env).console_view != "grid":
            for side in ("a", "b"):
                self.query_one(f"#label-grid-{side}", GridView).display = False
            self._show_env_pair(item, env)
            return
        try:
            grid_env = self._grid_env(env, item.scene)
            start = grid_env.parse_state(pair["state"])
        except (ValueError, TypeError, KeyError) as exc:  # a scene file gone, a state off this scene
            self.query_one("#label-state", Static).update(
                Text(f" pair #{pair['id']}: cannot draw it: {exc}", style="bold red"))
            for side in ("a", "b"):
                self.query_one(f"#label-grid-{side}", GridView).display = False
                self.query_one(f"#label-moves-{side}", Static).update(
                    format_moves(item.a if side == "a" else item.b))
            return
        scene = getattr(grid_env, "scene", None)
        head = Text()
        head.append(f" pair #{pair['id']}", style="bold")
        head.append(f" · from {pair.get('labeler')} · start {start}", style="")
        if scene is not None and (scene.landmarks or scene.walls):  # the empty scene is the default: unnamed
            head.append(f" · scene {scene.name}", style="dim")
        self.query_one("#label-state", Static).update(head)
        # cells of 5 columns, fewer where a scene's larger grid would not fit a side (half the screen)
        cell_width = fit_cell_width(grid_env.size, 5, max(16, (self.size.width or self.app.size.width) // 2 - 8))
        for side, moves, score in (("a", item.a, item.a_score), ("b", item.b, item.b_score)):
            end, reward, path = self._path(start, moves)
            grid = self.query_one(f"#label-grid-{side}", GridView)
            grid.cell_width = cell_width
            grid.model = GridModel(
                size=grid_env.size, goal=tuple(grid_env.goal), agent=end, path=path, start=start,
                landmarks=tuple(scene.landmarks) if scene is not None else (),
                walls=getattr(grid_env, "walls", ()))
            t = Text()
            t.append(format_moves(moves) if moves else "[] (no moves)", style="bold")
            t.append(f"\n{len(moves)} move{'s' if len(moves) != 1 else ''} → {short_state(end)} · reward {reward:+.0f}")
            if self.blind:
                t.append("\ncritic: hidden (h shows)", style="dim")
            elif score is not None:
                t.append(f"\ncritic: {score:+.2f}", style="#d7af87")
            else:
                t.append("\ncritic: no score", style="dim")
            self.query_one(f"#label-moves-{side}", Static).update(t)

    def _show_env_pair(self, item: Item, env: str) -> None:
        """Two move lists on a non-grid env: each one's caption on the pair's first deal
        (the deal both lists met), its reward there, and the critic's score."""
        pair = item.pair
        meta = pair.get("meta") if isinstance(pair.get("meta"), dict) else {}
        seeds = meta.get("seeds") or [None]
        head = Text()
        head.append(f" pair #{pair['id']}", style="bold")
        head.append(f" · from {pair.get('labeler')} · {env} · start {state_text(pair.get('state'), env)}")
        if len(seeds) > 1:
            head.append(f" · scored over {len(seeds)} deals, shown on the first", style="dim")
        self.query_one("#label-state", Static).update(head)
        for side, moves, score in (("a", item.a, item.a_score), ("b", item.b, item.b_score)):
            t = Text()
            t.append(format_moves(moves) if moves else "[] (no moves)", style="bold")
            try:
                caption, reward = _caption_of(env, pair["state"], moves, seeds[0])
                t.append(f"\n{caption} · reward {reward:+.0f}")
            except (ValueError, TypeError, KeyError) as exc:
                t.append(f"\ncannot replay this list: {exc}", style="red")
            if self.blind:
                t.append("\ncritic: hidden (h shows)", style="dim")
            elif score is not None:
                t.append(f"\n{pair.get('labeler')}: {score:+.2f}", style="#d7af87")
            self.query_one(f"#label-moves-{side}", Static).update(t)

    def _show_captions(self, item: Item) -> None:
        """A judged pair of episodes: both captions, and the judge's choice and raw answer
        (hidden when labelling blind)."""
        pair = item.pair
        meta = pair.get("meta") if isinstance(pair.get("meta"), dict) else {}
        head = Text()
        head.append(f" pair #{pair['id']}", style="bold")
        head.append(f" · judged episodes ({meta.get('env', '?')}) · start {state_text(pair.get('state'), meta.get('env'))}")
        if self.blind:
            head.append("\n judge: hidden (h shows)", style="dim")
        else:
            judge_side = "A" if item.a == _side(pair.get("chosen")) else "B"
            head.append(f"\n judge {meta.get('judge', pair.get('labeler'))} chose {judge_side}", style="#d7af87")
            head.append(f" · raw answer {str(meta.get('raw_answer', ''))[:60]!r}", style="dim")
        self.query_one("#label-state", Static).update(head)
        for side, caption in (("a", item.a), ("b", item.b)):
            self.query_one(f"#label-moves-{side}", Static).update(Text(str(caption), style="bold"))

    # ---- actions ------------------------------------------------------------------
    async def action_choose(self, side: str) -> None:
        await self._label(side)

    async def action_tie(self) -> None:
        await self._label("tie")

    async def _label(self, choice: str) -> None:
        item = self.current
        if item is None:
            self.notify("nothing to label")
            return
        try:
            self.session_run, done = await self.app.registry.call(
                write_label, item, choice, self.session_run, self.blind)
        except Exception as exc:  # noqa: BLE001
            self.app.report_error("label not saved", exc)
            return
        done.index, done.choice = self.index, choice
        held_in = str(item.pair.get("run_id")) if item.in_place else self.session_run
        if held_in and held_in not in self.app.label_runs:
            self.app.label_runs.append(held_in)
        self.history.append(done)
        self.labelled_now += 1
        self.index += 1
        self._count_agreement(item, choice, +1)
        self.show()
        self._log_progress()

    def action_skip(self) -> None:
        if self.current is None:
            return
        self.history.append(Done(self.index, "skip"))
        self.skipped += 1
        self.index += 1
        self.show()

    async def action_undo(self) -> None:
        if not self.history:
            self.notify("nothing to undo")
            return
        done = self.history.pop()
        item = self.queue[done.index]
        if done.kind == "label":
            try:
                await self.app.registry.call(undo_label, item, done)
            except Exception as exc:  # noqa: BLE001
                self.history.append(done)
                self.app.report_error("undo failed", exc)
                return
            self.labelled_now -= 1
            self._count_agreement(item, done.choice, -1)
        else:
            self.skipped -= 1
        self.index = done.index
        self.show()
        self._log_progress()

    def _count_agreement(self, item: Item, choice: str, sign: int) -> None:
        """Keep the per-labeler agreement line current as labels are made and undone."""
        labeler = item.pair.get("labeler")
        if item.in_place or choice == "tie" or labeler not in SOURCE_LABELERS:
            return
        chosen = item.a if choice == "A" else item.b
        agree, n = self.agreement.get(labeler, (0, 0))
        self.agreement[labeler] = (agree + sign * (chosen == _side(item.pair.get("chosen"))), n + sign)

    def action_toggle_scores(self) -> None:
        self.blind = not self.blind
        self.show()

    def _log_progress(self) -> None:
        run, n = self.session_run, self.labelled_now
        if run is None:
            return

        async def log() -> None:
            try:
                await self.app.registry.call(lambda reg: reg.log_metrics(run, {"labels": n}))
            except Exception:  # noqa: BLE001 - progress metric only
                pass

        self.run_worker(log(), group="labels-metric", exit_on_error=False)

    @property
    def session_run(self) -> str | None:
        return self.app.labels_run_id

    @session_run.setter
    def session_run(self, run_id: str | None) -> None:
        self.app.labels_run_id = run_id
