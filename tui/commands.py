"""One table of user commands -> footer bindings AND command-palette entries.

Every command has a key (shown in the footer of the screen it belongs to) and an
entry in the command palette (ctrl+p) that works from any screen: picking it
switches to its screen first. A test checks the two never drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

SCREENS_GROUP = Binding.Group("Screens", compact=True)


@dataclass(frozen=True)
class Command:
    title: str  # palette title
    help: str  # palette help line
    key: str  # binding key(s)
    action: str  # action on the target
    scope: str  # "app", or the mode name of the screen that owns it
    label: str = ""  # footer label (defaults to title)
    target: str = "screen"  # "screen" | "app" | a CSS selector inside the screen
    show: bool = True
    tab: str | None = None  # TabbedContent pane to reveal before running


COMMANDS: tuple[Command, ...] = (
    # app-wide
    Command("Open lab", "The Lab: grid, actor, critic, strategy prompt", "1", "switch_mode('lab')", "app", "Lab", "app"),
    Command("Open runs", "Table of runs with details, charts and logs", "2", "switch_mode('runs')", "app", "Runs", "app"),
    Command("Open labelling", "Label preference pairs by hand", "3", "switch_mode('labels')", "app", "Label", "app"),
    Command("Open jobs", "Launch, watch and kill background jobs", "4", "switch_mode('jobs')", "app", "Jobs", "app"),
    Command("Open archive", "Trajectory archives: browse, filter, verify, replay on the grid", "5",
            "switch_mode('archive')", "app", "Archive", "app"),
    # lab
    Command("Step", "Let the actor take one action from the current state", "s", "step", "lab"),
    Command("Run episode", "Step until the episode ends (p pauses)", "e", "run_episode", "lab", "Episode"),
    Command("Pause", "Stop the running episode after the current step", "p", "pause", "lab"),
    Command("Reset episode", "Back to the chosen start state (Blackjack: the same deal again)", "r", "reset", "lab",
            "Reset"),
    Command("New deal", "Deal the next hand (envs whose seed deals the start: Blackjack)", "n", "new_episode", "lab",
            "New deal"),
    Command("Toggle constrained decoding", "Grammar-constrained vs free-text generation", "c", "toggle_constrained", "lab",
            "Constrain"),
    Command("Sample candidates", "Sample K move lists here and score them (critic / exact)", "k", "candidates", "lab",
            "Sample", tab="tab-critic"),
    Command("Toggle value overlay", "Show V(s) per cell on the grid (critic, else exact V*)", "v", "toggle_values", "lab",
            "Values"),
    Command("Next Lab tab", "Show the next tab: Episode, Critic, Strategy (the focus stays where it is)", "t",
            "next_tab", "lab", "Tab"),
    Command("Edit strategy prompt", "Open the strategy prompt editor", "ctrl+e", "edit_strategy", "lab", "Strategy"),
    Command("Validate strategy", "Check the strategy prompt text", "ctrl+t", "validate", "lab", "Validate",
            target="StrategyEditor", tab="tab-strategy"),
    Command("Save strategy version", "Save the strategy text as a new version in the registry", "ctrl+s",
            "save_version", "lab", "Save version", target="StrategyEditor", tab="tab-strategy"),
    Command("Apply strategy", "Use the editor's strategy for the live actor", "ctrl+g", "apply", "lab", "Apply",
            target="StrategyEditor", tab="tab-strategy"),
    Command("Evaluate strategy", "Score the editor's strategy from N start states (asked: 8 for a quick check, or "
            "all; saved first; a detached evaluate job, its score shown with the version when it ends)", "ctrl+o", "evaluate", "lab", "Evaluate", target="StrategyEditor", tab="tab-strategy"),
    Command("Restore strategy version", "Load the highlighted version and apply it", "ctrl+r", "restore", "lab",
            "Restore version", target="StrategyEditor", tab="tab-strategy"),
    # runs
    Command("Refresh runs", "Reload the runs table now", "f5", "refresh", "runs", "Refresh"),
    Command("Filter runs", "Filter by text, kind:… or status:…", "slash", "filter", "runs", "Filter"),
    Command("Sort runs", "Sort by a column one way, then the other, then the next column", "o", "sort", "runs",
            "Sort"),
    Command("Mark run", "Select a run for the metric overlay", "space", "mark", "runs", "Mark"),
    Command("Overlay metric", "Chart a metric across the marked runs", "m", "overlay", "runs", "Overlay"),
    Command("Compare runs", "The marked runs (2 or 3) side by side: params that differ, then metrics", "equals_sign",
            "compare", "runs", "Compare"),
    Command("Load adapter into lab", "Load the run's adapter into the Lab's actor", "a", "load_adapter", "runs",
            "Load adapter"),
    Command("Resume run", "Continue the KILLED/FAILED run from its newest checkpoint (a detached job)", "R",
            "resume", "runs", "Resume"),
    Command("Kill run", "Stop the selected running run (asks first; it checkpoints)", "K", "kill", "runs", "Kill"),
    Command("Load critic into lab", "Load the selected train-critic run's critic into the console (Lab values, "
            "candidates, forms)", "c", "load_critic", "runs", "Load critic"),
    Command("Show run log", "The selected run's log, following it live", "l", "show_log", "runs", "Log"),
    Command("Next run tab", "Show the next tab: Info, Chart, Log, Board", "t", "next_tab", "runs", "Tab"),
    Command("Export to TensorBoard", "Write the marked runs (or the selected one) as TensorBoard event files",
            "x", "export", "runs", "Export"),
    Command("Note on run", "Write a note on the selected run (shown in Info, found by the filter; empty removes it)",
            "N", "note", "runs", "Note"),
    Command("Delete runs", "Delete the marked runs (or the selected one), their child runs and folders (asks "
            "first; names the kept runs that read them)", "D", "delete", "runs", "Delete"),
    # labelling
    Command("Choose A", "A is better (chosen), B rejected", "a", "choose('A')", "labels", "A better"),
    Command("Choose B", "B is better (chosen), A rejected", "b", "choose('B')", "labels", "B better"),
    Command("Tie", "Neither is better", "t", "tie", "labels"),
    Command("Skip pair", "Leave this pair unlabelled for now", "n", "skip", "labels", "Skip"),
    Command("Undo label", "Undo the last label or skip", "u", "undo", "labels", "Undo"),
    Command("Hide critic scores", "Hide/show the critic's scores (label blind)", "h", "toggle_scores", "labels",
            "Blind"),
    # jobs
    Command("New job", "Fill in a job form and launch it", "n", "new_job", "jobs", "New job"),
    Command("Launch job", "Launch the job in the form (detached)", "ctrl+l", "launch", "jobs", "Launch"),
    Command("Kill job", "Stop the selected job (asks first; SIGTERM, it checkpoints)", "K", "kill", "jobs", "Kill"),
    Command("Resume job", "Continue the KILLED/FAILED job from its newest checkpoint (a detached job)", "R",
            "resume", "jobs", "Resume"),
    Command("Refresh jobs", "Reload the jobs table now", "f5", "refresh", "jobs", "Refresh"),
    Command("Show job log", "The selected job's log, following it live", "l", "show_tab('tab-job-log')", "jobs", "Log"),
    Command("Show job chart", "The selected job's metric chart", "g", "show_tab('tab-job-chart')", "jobs", "Chart"),
    # archive
    Command("Step replay forward", "Replay the selected trajectory one move forward", "right", "step(1)", "archive",
            "Step"),
    Command("Step replay back", "Replay the selected trajectory one move back", "left", "step(-1)", "archive",
            "Back"),
    Command("Replay from the start", "The selected trajectory at its start pose", "home", "jump('start')", "archive",
            "Start"),
    Command("Replay to the end", "The selected trajectory at its final pose", "end", "jump('end')", "archive", "End"),
    Command("Play replay", "Play/pause the selected trajectory move by move", "space", "play", "archive", "Play"),
    Command("Verify archive", "Replay every trajectory of the archive file and mark ✓/✗", "v", "verify", "archive",
            "Verify"),
    Command("Filter trajectories", "Filter by text, landmark:…, policy:…, bd:…, desc:… or verify:fail", "slash",
            "filter", "archive", "Filter"),
    Command("Choose archive run", "Pick another archive run (newest first)", "r", "choose_run", "archive", "Run"),
    Command("Refresh archive", "Reload the archive runs and the file", "f5", "refresh", "archive", "Refresh"),
)

# Palette entries whose key is bound on their screen but kept out of the footer (no room,
# and the footer's snapshots stay as they are).
PALETTE_ONLY: tuple[Command, ...] = (
    Command("Keys", "Show or hide every key of this screen with what it does (one map for all screens)",
            "question_mark", "toggle_keys", "app", "Keys", "app", show=False),
    Command("Decision transformer: act an instruction", "Type an instruction; the newest trained dt run acts it "
            "on the grid from the selected start (its annotations and landmark order beside)", "i", "dt_instruct",
            "archive", "Instruct", show=False),
    Command("Load preset critic", "Load a critic backbone preset (minilm-l6 by default) with an untrained head: "
            "its values rank nothing until a train-critic run fits it (then c on that run)", "ctrl+k",
            "load_preset_critic", "app", "Preset critic", "app", show=False),
    Command("Sort runs by column", "Pick the column to sort by, one key each (c created, k kind, s status, "
            "d duration, i id, m metric); its key again flips the order", "O", "sort_column", "runs", "Sort by",
            show=False),
)


def env_commands() -> list[tuple[str, str, str]]:
    """(title, help, env) of the palette entries "Lab: play <env>", one per env of the
    catalog (its help: the env's `lab_blurb`). Palette only, no key: switching env is
    rare, and the footer has no room."""
    from lactchain.envs.catalog import ENVS, env_class

    return [(f"Lab: play {name}", getattr(env_class(name), "lab_blurb", f"The Lab plays {name}"), name)
            for name in ENVS]


def commands_for(scope: str) -> list[Command]:
    return [c for c in COMMANDS + PALETTE_ONLY if c.scope == scope]


def bindings_for(scope: str, target: str = "screen") -> list[Binding]:
    """Bindings for a screen (or the app, or a widget target inside a screen)."""
    out = []
    for c in commands_for(scope):
        if (c.target if scope != "app" else "app") != (target if scope != "app" else "app"):
            continue
        group = SCREENS_GROUP if scope == "app" else None
        out.append(Binding(c.key, c.action, c.label or c.title, show=c.show, tooltip=c.help, group=group))
    return out


# alt+1..alt+5 (and escape then a digit typed quickly, which terminals send as the same
# bytes) reach Textual as the characters a Mac keyboard's option+digit types. The app takes
# them before any widget (`LactChainApp.on_event`), so they switch screens from anywhere, a
# focused field or the strategy editor included: a research console has no use for these
# five characters in a field.
ALT_DIGITS = {"inverted_exclamation_mark": "lab", "trade_mark_sign": "runs", "pound_sign": "labels",
              "cent_sign": "jobs", "infinity": "archive"}
