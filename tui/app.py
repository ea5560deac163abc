"""`lactchain-tui`: the LactChain lab console.

    lactchain-tui [--db PATH] [--actor PRESET_OR_PATH] [--adapter RUN_ID] [--critic PRESET_OR_RUN]
                  [--env grid|blackjack] [--scene empty|flat|rooms|maze|FILE.json]

The first screen paints before any model is touched: this module imports no
torch/transformers; the actor and critic load in thread workers after the first
refresh and report progress through messages.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from textual import events, work
from textual.app import App, SystemCommand
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widget import AwaitMount

from lactchain.envs.catalog import DEFAULT_ENV, ENVS, env_class, env_name
from lactchain.envs.scenes import get_scene, is_scene_file
from lactchain.jobs.checks import world_note
from lactchain.machine import calm_omp_threads
from lactchain.paths import default_db_path
from lactchain.runs.registry import Registry, RunNotFound, looks_like_run_id
from tui import console_state
from tui.commands import ALT_DIGITS, COMMANDS, PALETTE_ONLY, Command, bindings_for, env_commands
from tui.format import safe
from tui.lab_recorder import LabRecorder
from tui.lab_session import LabSession
from tui.messages import ModelFailed, ModelLoaded, ModelProgress
from tui.models import UNTRAINED_NOTE, load_actor, load_critic, resolve_adapter
from tui.registry_client import RegistryClient, default_factory
from tui.screens.lab import LabScreen

DEFAULT_ACTOR = "smollm2-135m"


def _lazy_screen(module: str, name: str) -> Callable[[], Screen]:
    """A MODES entry that imports its screen module on first use (faster first paint)."""

    def make() -> Screen:
        import importlib

        return getattr(importlib.import_module(module), name)()

    make.__name__ = name
    return make


class LactChainApp(App):
    """The lab console. Everything heavy is injected or loaded lazily:

    - `registry_factory` opens the registry (default: `lactchain.runs.registry.Registry(db_path)`),
    - `actor` / `critic`: already-loaded models (tests); otherwise they load from
      `actor_spec` / `critic_spec` in workers when `load_models` is true,
    - `launcher(request) -> LaunchResult` starts a detached job (default: `jobs_bridge.launch_job`, the job layer in this process).
    """

    TITLE = "LactChain lab"
    CSS_PATH = "app.tcss"
    MODES = {
        "lab": LabScreen,
        "runs": _lazy_screen("tui.screens.runs", "RunsScreen"),
        "labels": _lazy_screen("tui.screens.labelling", "LabellingScreen"),
        "jobs": _lazy_screen("tui.screens.jobs", "JobsScreen"),
        "archive": _lazy_screen("tui.screens.archive", "ArchiveScreen"),
    }
    DEFAULT_MODE = "lab"
    PAINT_MOUNTED_SWITCH_AT_ONCE = True  # False: Textual's stock 50 ms mask on every switch (bench comparison)
    BINDINGS = bindings_for("app")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    actor_status: reactive[str] = reactive("not loaded")
    critic_status: reactive[str] = reactive("not loaded")
    models_loading: reactive[int] = reactive(0)
    model_fraction: reactive[float | None] = reactive(None)

    def __init__(
        self,
        db_path: str | os.PathLike | None = None,
        actor_spec: str | None = DEFAULT_ACTOR,
        adapter: str | None = None,
        critic_spec: str | None = None,
        *,
        registry_factory: Callable[[], Any] | None = None,
        actor: Any | None = None,
        critic: Any | None = None,
        load_models: bool = True,
        launcher: Callable[..., Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        env: str = DEFAULT_ENV,
    ) -> None:
        super().__init__()
        self.db_path = Path(db_path) if db_path is not None else None
        self.actor_spec = actor_spec
        self.adapter = adapter  # the adapter asked for last (a load may still run, or have failed)
        # the preset and adapter of the actor loaded (a reload may still run, or have failed: the old one plays)
        self.loaded_actor_spec = actor_spec if actor is not None else None
        self.loaded_adapter = adapter if actor is not None else None
        # --adapter none: the remembered actor and adapter stay remembered ("not this time")
        self.keep_saved_adapter = False
        self.critic_spec = critic_spec
        self.load_models = load_models
        self.launcher = launcher
        self.registry = RegistryClient(registry_factory or default_factory(self.db_path))
        self.db_label = self.db_path.name if self.db_path else "registry.db"
        self.env_kwargs = dict(env_kwargs or {})
        self.lab_session = LabSession(env_name=env, env_kwargs=self.env_kwargs)
        self.first_env = self.lab_session.env_name  # env_kwargs are this env's (a grid size means nothing to Blackjack)
        self.actor: Any | None = actor
        self.critic: Any | None = critic
        self.actor_label, actor_status = self._initial_status(actor, actor_spec, "none")
        self.critic_label, critic_status = self._initial_status(critic, critic_spec, "")
        for reactive_attr, status in ((LactChainApp.actor_status, actor_status), (LactChainApp.critic_status, critic_status)):
            if status is not None:
                self.set_reactive(reactive_attr, status)
        # Model loads run one at a time: two threads importing transformers at once can
        # see half-initialised modules, and on a small CPU box they only slow each other.
        self._load_lock = threading.Lock()
        self.lab_recorder = LabRecorder()  # the Lab's episodes, as a `play` run
        self.labels_run_id: str | None = None  # created by the Labelling screen on the first label
        # The runs holding this session's labels (the labels run, and pairs runs labelled in
        # place): the Jobs screen's Train actor form is pre-filled with them.
        self.label_runs: list[str] = []
        self.started_at = time.perf_counter()
        self.first_paint_s: float | None = None
        self.startup_notes: list[str] = []  # said as toasts after the first paint (a registry upgraded on opening)
        self.scene_arg: str | None = None  # `--scene` as given (a file's path), for what records the Lab's world
        self._visited_modes = {self.DEFAULT_MODE}  # screens mounted once: a switch back has nothing to mask
        self._switching_to_mounted = False

    def _initial_status(self, model: Any | None, spec: str | None, unset_label: str) -> tuple[str, str | None]:
        """(label, top-bar status) of a model slot before any background load:
        given in memory (tests), nothing asked for, or queued for loading."""
        if model is not None:
            label = getattr(model, "name", None) or spec or type(model).__name__
            return label, f"{label} ✓"
        if not spec:
            return unset_label, "none"
        return spec, f"{spec} (queued)" if self.load_models else None

    # ---- lifecycle ----------------------------------------------------------------

    def on_mount(self) -> None:
        # 8/16-colour terminals map the accent to bright red: app.tcss marks focus differently there.
        self.set_class(not self.is_headless and self.console.color_system in ("standard", "windows"), "-few-colours")
        self.call_after_refresh(self._after_first_paint)

    def _after_first_paint(self) -> None:
        self.first_paint_s = time.perf_counter() - self.started_at
        for note in self.startup_notes:
            self.notify(note, severity="warning", timeout=15)
        if os.environ.get("LACTCHAIN_TUI_STARTUP_FILE"):
            # wall seconds from App() to the first paint, then CPU seconds of the whole process so far
            Path(os.environ["LACTCHAIN_TUI_STARTUP_FILE"]).write_text(
                f"{self.first_paint_s:.3f} {time.process_time():.3f}\n")
        if self.load_models:
            if self.actor is None and self.actor_spec:
                self.load_actor(self.actor_spec, self.adapter)
            if self.critic is None and self.critic_spec:
                self.load_critic(self.critic_spec)

    async def on_unmount(self) -> None:
        # (A labelling session's run is FINISHED from its first label: nothing to end here.)
        self.registry.close()

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        """A toast, unless the same one is still on screen (pressing a key again must not
        stack copies of "already running"). Its text is shown as given: a run id, a path or
        an error that holds markup or escapes is never interpreted (`safe`)."""
        message, title = safe(message), safe(title)
        if any(n.message == message and n.title == title for n in self._notifications):
            return
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # ---- screen switches -----------------------------------------------------------

    def switch_mode(self, mode: str) -> AwaitMount:
        """Textual holds every repaint for 50 ms after a mode switch (`delay_update`) to mask
        the new screen's mount. A screen already mounted has nothing to mask: it paints at
        once, and its `on_screen_resume` refresh follows as a second frame."""
        self._switching_to_mounted = self.PAINT_MOUNTED_SWITCH_AT_ONCE and mode in self._visited_modes
        self._visited_modes.add(mode)
        try:
            return super().switch_mode(mode)
        finally:
            self._switching_to_mounted = False

    def delay_update(self, delay: float = 0.05) -> None:
        if not self._switching_to_mounted:
            super().delay_update(delay)

    # ---- the one error path -------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        """alt+1..5 (or escape then a digit, typed quickly) switch screens before any widget
        sees the key: a field would otherwise type it as ¡ ™ £ ¢ ∞ (`tui.commands.ALT_DIGITS`).
        Not under a dialog: it is answered first."""
        if isinstance(event, events.Key) and event.key in ALT_DIGITS and not isinstance(self.screen, ModalScreen):
            event.stop()
            event.prevent_default()
            await self.run_action(f"switch_mode('{ALT_DIGITS[event.key]}')")
            return
        await super().on_event(event)

    def action_toggle_keys(self) -> None:
        """`?`: Textual's keys panel (every binding of the focused widget, its screen and
        the app, from tui.commands), or away again."""
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_load_preset_critic(self) -> None:
        """A critic backbone preset (minilm-l6 by default), with an untrained head: the
        console says what its values are worth and how to fit it."""
        from tui.widgets.confirm import AskScreen

        def check(spec: str) -> str | None:
            from lactchain.models.presets import CRITIC, check_spec

            try:
                check_spec(spec, CRITIC)
            except ValueError as exc:
                return str(exc).splitlines()[0]
            return None

        self.push_screen(AskScreen("Critic preset to load (minilm-l6, tiny, sfr-embedding-mistral, or a model "
                                   "folder). Its value head starts untrained.", "minilm-l6", check),
                         lambda spec: self.load_critic(spec) if spec else None)

    def report_error(self, title: str, error: BaseException | str | None) -> None:
        text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error or "")
        self.log.error(title, text)
        self.notify(text or title, title=title, severity="error", timeout=8)

    # ---- models -------------------------------------------------------------------
    def load_actor(self, spec: str, adapter: str | None = None) -> None:
        """(Re)load the actor in the background; the Lab keeps working with the old one until then."""
        self.actor_spec, self.adapter = spec, adapter
        self.models_loading += 1
        self.actor_status = f"loading {spec}{' + ' + adapter if adapter else ''}…"
        self._load_actor_worker(spec, adapter)

    @property
    def lab_world_params(self) -> dict[str, Any]:
        """The world the Lab plays as a run records it and a job form takes it: a scene read
        from a file by the path it was given (`--scene FILE`), never the scene itself."""
        world = dict(self.lab_session.world)
        if isinstance(world.get("scene"), dict):
            world["scene"] = self.scene_arg or world["scene"].get("name")
        return world

    @property
    def live_actor(self) -> tuple[str | None, str | None]:
        """(preset, adapter) of the actor the Lab plays: the one loaded (a reload that failed
        or still runs leaves it playing), else, until one has loaded, the one asked for."""
        if self.actor is not None:
            return self.loaded_actor_spec, self.loaded_adapter
        return self.actor_spec, self.adapter

    def load_critic(self, spec: str) -> None:
        self.critic_spec = spec
        self.models_loading += 1
        self.critic_status = f"{spec} (queued)" if self._load_lock.locked() else f"loading {spec}…"
        self._load_critic_worker(spec)

    @work(thread=True, exclusive=True, group="load-actor", exit_on_error=False, name="load actor")
    def _load_actor_worker(self, spec: str, adapter: str | None) -> None:
        t0 = time.perf_counter()
        registry = self._registry_or_none()
        try:
            path = resolve_adapter(adapter, registry, base=spec) if adapter else None
            with self._load_lock:
                actor = load_actor(spec, path, progress=lambda text, frac: self.post_message(
                    ModelProgress("actor", text, frac)))
        except Exception as exc:  # noqa: BLE001 - reported in the UI
            self.post_message(ModelFailed("actor", f"{type(exc).__name__}: {exc}"))
            return
        label = spec + (f" + {adapter}" if adapter else "")
        self.post_message(ModelLoaded("actor", actor, label, time.perf_counter() - t0, adapter, spec))
        if adapter:
            self.call_from_thread(self._note_adapter_world, adapter, registry)

    @work(thread=True, exclusive=True, group="load-critic", exit_on_error=False, name="load critic")
    def _load_critic_worker(self, spec: str) -> None:
        t0 = time.perf_counter()
        try:
            with self._load_lock:
                critic = load_critic(spec, self._registry_or_none(), progress=lambda text, frac: self.post_message(
                    ModelProgress("critic", text, frac)))
        except ImportError:
            self.post_message(ModelFailed("critic", "lactchain.models.critic is not available yet"))
            return
        except Exception as exc:  # noqa: BLE001
            self.post_message(ModelFailed("critic", f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(ModelLoaded("critic", critic, spec, time.perf_counter() - t0))

    def _registry_or_none(self) -> Any | None:
        """The registry for a worker thread (the Registry is thread-safe), or None."""
        try:
            return self.registry.call_sync(lambda reg: reg)
        except Exception:  # noqa: BLE001
            return None

    def on_model_progress(self, message: ModelProgress) -> None:
        pct = f" {message.fraction:.0%}" if message.fraction is not None else ""
        status = f"loading… {message.text}{pct}"
        if message.role == "actor":
            self.actor_status = status
        else:
            self.critic_status = status
        self.model_fraction = message.fraction

    def on_model_loaded(self, message: ModelLoaded) -> None:
        self.models_loading = max(0, self.models_loading - 1)
        if message.role == "actor":
            self.actor, self.actor_label, self.loaded_adapter = message.model, message.label, message.adapter
            self.loaded_actor_spec = message.spec
            self.actor_status = f"{message.label} ✓"
            if not (self.keep_saved_adapter and message.adapter is None):  # --adapter none: not this time only
                console_state.save(self.db_path, actor=message.spec, adapter=message.adapter)  # reopened with it
            self.keep_saved_adapter = False
        else:
            untrained = getattr(message.model, "untrained", False)
            self.critic = message.model
            self.critic_label = message.label + (" (untrained)" if untrained else "")
            self.critic_status = f"{self.critic_label} ✓"
            console_state.save(self.db_path, critic=self.critic_spec)
        loaded = f"{message.role} {message.label} loaded in {message.seconds:.1f}s"
        if getattr(message.model, "untrained", False):
            self.notify(f"{loaded}; {UNTRAINED_NOTE}", timeout=12, markup=False)
        else:
            self.notify(loaded)
        self._models_changed()

    async def _on_key(self, event: events.Key) -> None:
        """A key that reaches the app while a chooser is on top was typed
        right after the key that opened it: both were queued for the screen below before
        the chooser showed (`O` then `k` on Runs sorted nothing and left the chooser open).
        It goes to the chooser, as meant; a chooser consumes every key itself, so none of
        its own comes back here. Any other key: the app's bindings, as always."""
        from tui.widgets.confirm import ChooseScreen

        if isinstance(self.screen, ChooseScreen):
            event.prevent_default()  # not App._on_key: the key is the chooser's
            self.screen.post_message(events.Key(event.key, event.character))

    def on_model_failed(self, message: ModelFailed) -> None:
        self.models_loading = max(0, self.models_loading - 1)
        if message.role == "actor":
            self.actor_status = "failed" if self.actor is None else f"{self.actor_label} ✓ (reload failed)"
        else:
            self.critic_status = "not loaded"
            console_state.save(self.db_path, critic=None)  # not offered again next time
        self.report_error(f"{message.role} not loaded", message.error)
        self._models_changed()

    def _models_changed(self) -> None:
        for screen in self._installed_or_mode_screens():
            hook = getattr(screen, "on_model_changed", None)
            if callable(hook):
                hook()

    def _installed_or_mode_screens(self) -> Iterable[Screen]:
        seen = []
        for stack in self._screen_stacks.values():
            for screen in stack:
                if screen not in seen:
                    seen.append(screen)
        return seen

    # ---- command palette ----------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from rich.markup import escape

        for command in COMMANDS + PALETTE_ONLY:  # the key hint escaped: "[a]" is not a markup tag to drop
            yield SystemCommand(command.title, escape(f"{command.help} [{command.key}]"),
                                lambda c=command: self.run_command(c))
        for title, help_text, env in env_commands():
            yield SystemCommand(title, help_text, lambda e=env: self.play_env(e))
        yield from super().get_system_commands(screen)

    async def play_env(self, name: str) -> None:
        """Make the Lab play another env (palette: "Lab: play <env>"): a new session and a
        new `play` run in the registry; the Lab swaps its env pane."""
        name = env_name(name)
        if self.current_mode != "lab":
            await self.switch_mode("lab")
        if name == self.lab_session.env_name:
            self.notify(f"the Lab already plays {name}")
            return
        old = self.lab_session
        old.reset()  # a step still generating in the old env is dropped (a new epoch), not recorded below
        self.lab_session = LabSession(env_name=name, env_kwargs=self.env_kwargs if name == self.first_env else {},
                                      constrained=old.constrained, temperature=old.temperature)
        self.lab_recorder = LabRecorder()  # one play run per env: its params name the env
        for screen in self._installed_or_mode_screens():
            if isinstance(screen, LabScreen):
                await screen.env_changed()
        if self.loaded_adapter and self.actor is not None:
            self._note_adapter_world(self.loaded_adapter)

    @work(thread=True, exclusive=True, group="adapter-world", exit_on_error=False, name="adapter world")
    def _note_adapter_world(self, adapter: str, registry: Any = None) -> None:
        """A toast when the loaded adapter's actor learned in another world than the Lab
        plays (on loading it, and when the Lab switches env with it loaded)."""
        registry = registry if registry is not None else self._registry_or_none()
        note = world_note(registry, adapter, self.lab_session.world, here="the Lab plays") if registry else ""
        if note:  # a fair experiment, rarely the one meant
            self.call_from_thread(self.notify, note, severity="warning", timeout=12)

    async def run_command(self, command: Command) -> None:
        """Run a command from the palette: switch to its screen, reveal its tab, run it."""
        if command.scope == "app":
            await self.run_action(command.action, self)
            return
        if self.current_mode != command.scope:
            await self.switch_mode(command.scope)
        screen = self.screen
        if command.tab:
            from textual.widgets import TabbedContent

            for tabs in screen.query(TabbedContent):
                if command.tab in [p.id for p in tabs.query("TabPane")]:
                    tabs.active = command.tab
        ensure = getattr(screen, "ensure_editor", None)
        if command.target == "StrategyEditor" and ensure is not None:
            await ensure()
        target = screen if command.target == "screen" else screen.query_one(command.target)
        if target.check_action(command.action, ()) is False:  # e.g. "New deal" while the Lab plays the grid
            self.notify(f"{command.title}: not available here", severity="warning")
            return
        await self.run_action(command.action, target)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lactchain-tui",
        description="LactChain lab console: step the actor in the grid, edit the strategy prompt, "
        "label pairs, launch and watch jobs.",
    )
    p.add_argument("--db", type=Path, default=None,
                   help="run registry (SQLite); default $LACTCHAIN_DB or runs/registry.db")
    p.add_argument("--create", action="store_true",
                   help="create the --db registry's folder when it does not exist (otherwise refused: a typo "
                   "must not start an empty registry somewhere)")
    p.add_argument("--actor", default=DEFAULT_ACTOR,
                   help=f"actor preset or path (default {DEFAULT_ACTOR}; 'tiny' for tests; 'oracle' = the exact "
                   "planner, no model; 'none' = do not load)")
    p.add_argument("--adapter", default=None, help="LoRA adapter for the actor: a run id or a path (default: the "
                   "one the last session on this registry had loaded for the same actor, else none; 'none' = "
                   "none)")
    p.add_argument("--critic", default=None, help="critic preset, path or critic run id (default: the one the last "
                   "session on this registry had loaded, else none; 'none' = none)")
    p.add_argument("--env", default=DEFAULT_ENV,
                   help=f"the env the Lab plays: {', '.join(ENVS)} (default {DEFAULT_ENV}); the palette switches "
                   "(ctrl+p, 'Lab: play ...')")
    p.add_argument("--scene", default=None,
                   help="the grid's scene: empty (the default 4x4), flat (8x8 with a fridge, a bathtub, a sofa "
                   "and a bed), rooms (8x8 four rooms with doorways), maze (6x6 corridors) or a scene JSON file; "
                   "grid only")
    return p


def check_db(db: Path, explicit: bool, notes: list[str] | None = None) -> str | None:
    """Why the console cannot open this registry (one line), or None. A mistyped --db must
    not create folders and an empty registry; a file that is not a registry is refused
    before any screen draws. An upgrade of its schema is added to `notes`."""
    if db.is_dir():
        return f"--db {db} is a directory; point it at the registry file inside (e.g. {db / 'registry.db'})"
    if explicit and not db.parent.is_dir():
        return f"--db {db}: folder {db.parent} does not exist; create it first (mkdir -p {db.parent})"
    if db.exists():
        try:
            registry = Registry.open_for_reading(db)
        except Exception as exc:  # noqa: BLE001 - any reason it cannot be read, in one line
            text = " ".join(str(exc).split())
            return f"{db} cannot be opened as a registry: {text}"
        if registry.upgrade_note and notes is not None:
            notes.append(registry.upgrade_note)
        registry.close()
    return None


def main(argv: list[str] | None = None) -> int:
    calm_omp_threads()  # before torch loads (the models load in threads after the first paint)
    args = build_parser().parse_args(argv)
    for name in ("actor", "adapter", "critic", "env", "scene"):  # `--adapter ''` must not mean "the default"
        if getattr(args, name) is not None and not getattr(args, name).strip():
            sys.stderr.write(f"error: --{name} is empty: give a value, or leave --{name} out for its default\n")
            return 2

    try:
        env = env_name(args.env)
    except ValueError as exc:
        sys.stderr.write(f"error: --env: {exc}\n")
        return 2
    env_kwargs: dict[str, Any] = {}
    if args.scene is not None:
        if not env_class(env).has_scenes:
            sys.stderr.write(f"error: --scene: scenes are the grid's; --env {env} has none\n")
            return 2
        try:
            scene = get_scene(args.scene)
            # a file goes as the scene itself (its name is no bundled scene's)
            env_kwargs["scene"] = scene.as_dict() if is_scene_file(args.scene) else scene.name
        except ValueError as exc:
            sys.stderr.write(f"error: --scene: {exc}\n")
            return 2
    db = args.db
    if db is None:
        db = default_db_path()
    db = Path(db).expanduser().absolute()
    if args.create:
        db.parent.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    problem = check_db(db, explicit=args.db is not None, notes=notes)
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        return 2
    actor = None if str(args.actor).lower() == "none" else args.actor
    adapter, critic = console_state.models_to_reopen(db, actor, args.adapter, args.critic, gone=_gone_from(db),
                                                     notes=notes)
    app = LactChainApp(db_path=db, actor_spec=actor, adapter=adapter, critic_spec=critic, env=env,
                       env_kwargs=env_kwargs)
    app.startup_notes = notes  # toasts once the first screen is up
    app.scene_arg = args.scene
    app.keep_saved_adapter = console_state.said_none(args.adapter)
    app.run()
    return app.return_code or 0


def _gone_from(db: Path) -> Callable[[str], str | None]:
    """Why a remembered adapter or critic (a run id or a folder) can no longer load, or
    None: its run was deleted, its folder removed. A preset name, or a registry that
    cannot say, is left to the load."""
    def gone(spec: str) -> str | None:
        if Path(spec).expanduser().exists():
            return None
        if "/" in spec or os.sep in spec:
            return "its folder was removed"
        if not db.is_file():
            return None
        try:
            with Registry.open_for_reading(db) as registry:
                registry.get_run(spec)
        except RunNotFound:
            return "its run was deleted" if looks_like_run_id(spec) else None
        except Exception:  # noqa: BLE001 - the load will say what is wrong
            return None
        return None

    return gone


def run_console() -> None:
    """The `lactchain-tui` command: the console, then `leave`."""
    leave(main())


def leave(code: int) -> None:
    """End the console's process now that the terminal is restored: with the default actor
    loaded, Python's own teardown (freeing the model, joining a loading thread) kept a
    blank terminal for 1.3 s after ctrl+q. Everything worth keeping is already written
    (the registry commits each change; the console state is saved as it changes; jobs are
    detached processes of their own)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
