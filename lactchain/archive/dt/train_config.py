"""`DTTrainConfig`: the settings of `lactchain.archive.dt.train.train_dt`, which are the
`lactchain dt train` job's recorded params (light: no torch, so the CLI and the
console build options and forms from it before any model is loaded)."""

from __future__ import annotations

from dataclasses import dataclass

from lactchain.config import Config, option

LEARNED_TEXT, NO_TEXT_ENCODER = "learned", "none"  # lactchain.archive.dt.tokenizer.LEARNED, lactchain.archive.dt.model.NO_TEXT


@dataclass
class DTTrainConfig(Config):
    """A decision transformer trained on an archive run's trajectories (lactchain.archive.dt.train)."""

    HELP_PANELS = {  # --help by topic (lactchain.config.help_panel)
        "Model": ("n_layer", "n_head", "n_embd", "dropout", "max_visits", "rtg", "bd_to_go", "tie_actions",
                  "absolute_cells"),
        "Training": ("steps", "minutes", "batch_size", "lr", "text_dropout", "bd_dropout", "relabel", "threads"),
        "Validation and checkpoints": ("val_fraction", "select_fraction", "select_every", "eval_every",
                                       "checkpoint_every"),
    }

    archive: str = option("", "The archive run to learn from (lactchain archive fill).", short="-a",
                          check="run:archive", form="Archive run")
    describer: str = option("rule", "Whose descriptions are the instructions: rule (computed from the BD), or a "
                            "describer / model whose descriptions the archive stores (trajectories without one are "
                            "left out).", form=True)
    text_encoder: str = option(LEARNED_TEXT, "learned (a word-level tokenizer learned on the descriptions), a frozen "
                               "sentence encoder (minilm-l6), or none.", check="text_encoder", form=True)
    no_text: bool = option(False, "The behaviour-cloning baseline: no instruction (= --text-encoder none).")
    n_layer: int = option(2, "Transformer layers.", min=1, max=48)
    n_head: int = option(4, "Attention heads per layer.", min=1, max=64)
    n_embd: int = option(128, "Width; a multiple of --n-head.", min=8, max=4096)
    dropout: float = option(0.1, "Dropout.", min=0.0, max=0.9)
    steps: int = option(3000, "Optimizer steps in all (a resumed run counts the steps before it).", min=1,
                        max=10_000_000, form=True)
    minutes: float | None = option(None, "Training-time budget in minutes over the whole lineage; stops at --steps "
                                   "or this, whichever comes first (the lr schedule follows both).")
    batch_size: int = option(32, "Trajectories per optimizer step.", short="-b", min=1, max=65536)
    lr: float = option(1e-3, "AdamW peak learning rate.")
    val_fraction: float = option(0.1, "Trajectories held out for `dt eval` (by trajectory, seeded); never trained "
                                 "on, never used to pick a checkpoint.", min=0.0, max=0.9)
    select_fraction: float = option(0.1, "Training trajectories set aside to pick the best checkpoint (early "
                                    "stopping by closed-loop score); 0: the last checkpoint is the one evaluated.",
                                    min=0.0, max=0.9)
    select_every: int = option(250, "Score the model closed-loop on the selection trajectories every N steps (and "
                               "at the end).", min=1)
    seed: int = option(0, "Split, init and batches.", min=0, max=2**32 - 1)
    text_dropout: float = option(0.2, "Probability of hiding a row's instruction in training.", min=0.0, max=0.9)
    bd_dropout: float = option(0.7, "Probability of hiding a row's BD in training (independently), so the model "
                               "also learns to act from the instruction alone.", min=0.0, max=0.9)
    relabel: float = option(0.5, "Probability that a training row is a random window of its trajectory, relabelled "
                            "with its own BD and description (hindsight; never a held-out BD or instruction).",
                            min=0.0, max=1.0)
    max_visits: int = option(6, "BD landmark slots.", min=1, max=32)
    rtg: bool = option(False, "Add a return-to-go token per step.")
    bd_to_go: bool = option(True, "Condition on the landmarks still to visit (default) or on the whole target BD "
                            "at every step.", flag="--bd-to-go", negative="--bd-static")
    tie_actions: bool = option(False, "Tie the action embedding to the action head.")
    absolute_cells: bool = option(True, "Embed absolute cell ids (the pose's, the BD's final cell) besides the "
                                  "egocentric offsets.", flag="--cells", negative="--no-cells")
    eval_every: int = option(100, "Log loss + validation every N steps.", min=1)
    checkpoint_every: int = option(500, "Save a checkpoint every N steps (and at the end, and on SIGTERM).", min=1)
    threads: int | None = option(None, "torch CPU threads.", min=1, max=256)
    resume_from: str | None = option(None, "Continue the newest checkpoint of this dt run (what `lactchain runs "
                                     "resume` passes).", check="run:dt")
    # Not command-line options today.
    weight_decay: float = option(0.1, "AdamW weight decay (matrices only; biases and norms get none).", min=0.0,
                                 cli=False)
    warmup: float = option(0.05, "Fraction of the budget spent warming the learning rate up.", min=0.0, max=0.9,
                           cli=False)

    def check(self) -> None:
        if not self.archive:
            self.refuse("archive", "give the archive run to learn from (lactchain archive fill)")
        if self.no_text:
            if self.text_encoder not in (LEARNED_TEXT, NO_TEXT_ENCODER):
                self.refuse("no_text", f"conflicts with --text-encoder {self.text_encoder}; give one of them")
            self.text_encoder = NO_TEXT_ENCODER
        if self.n_embd % self.n_head:
            self.refuse("n_embd", f"is not a multiple of --n-head {self.n_head}")
        if not self.lr > 0:
            self.refuse("lr", "must be above 0")
        if self.minutes is not None and not self.minutes > 0:
            self.refuse("minutes", "must be above 0")
