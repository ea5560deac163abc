"""`TrainCriticConfig`: the settings of `lactchain.train.critic.train_critic`, which are the
`lactchain train-critic` job's recorded params (light: no torch, so the CLI and the
console build options and forms from it before any model is loaded)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lactchain.config import Config, option
from lactchain.envs.catalog import env_field, normalize_env_field
from lactchain.envs.world import check_world, scene_field, state_text_field, world_kwargs



@dataclass
class TrainCriticConfig(Config):
    """Monte-Carlo critic training (V and Q) on the stored steps of play runs."""

    episodes_from: list[str] = option([], "A play run whose stored steps to learn from (repeat for several).",
                                      short="-e", check="run:play", form="Episode runs")
    critic: str = option("minilm-l6", "Critic backbone: minilm-l6, sfr-embedding-mistral, tiny, tiny-causal, or a "
                         "local model folder.", form="Critic")
    epochs: int = option(5, "Passes over the training steps.", min=1, form="Epochs")
    gamma: float = option(0.9, "Discount per action.", min=0.0, max=0.999999, form="Gamma")
    lr: float = option(5e-4, "AdamW learning rate (LoRA + heads).")
    batch_size: int = option(64, "Stored steps (state, return samples) per optimizer step.", short="-b", min=2)
    seed: int = option(0, "Seed for the train/val split, shuffles and head init.", min=0, max=2**32 - 1)
    lora_r: int = option(8, "LoRA rank.", min=1, max=1024)
    q_weight: float = option(1.0, "Weight of the Q(s, moves) loss; 0 trains V only.", min=0.0)
    resume_from: str | None = option(None, "Continue from the last checkpoint of this train-critic run.",
                                     check="run:critic")
    processes: int = option(1, "Train on N processes: DDP under `accelerate launch` (gloo on a CPU; NCCL on "
                               "GPUs, one GPU each), each taking its slice of every --batch-size batch (at least "
                               "2 steps each: BatchNorm).",
                            min=1, max=64)
    env: str = env_field()
    scene: str | None = scene_field()
    state_text: str = state_text_field()
    # Not command-line options today.
    val_fraction: float = option(0.2, "Episodes held out for validation (split by episode, seeded).", min=0.0,
                                 max=0.9, cli=False)
    weight_decay: float = option(0.01, "AdamW weight decay.", min=0.0, cli=False)
    env_kwargs: dict[str, Any] | None = option(None, "Extra keyword arguments of the env the critic is built for "
                                               "(e.g. its moves).", cli=False)

    def check(self) -> None:
        if not self.episodes_from:
            self.refuse("episodes_from", "give at least one play run whose stored steps to learn from")
        if not self.lr > 0:
            self.refuse("lr", "must be above 0")
        if self.batch_size < 2 * self.processes:
            self.refuse("processes", f"--batch-size {self.batch_size} gives each of {self.processes} processes fewer "
                                     "than 2 steps (BatchNorm needs 2): raise --batch-size")
        normalize_env_field(self)
        check_world(self)

    def built_env_kwargs(self) -> dict[str, Any]:
        """The critic's env: its world (scene, state text) and any extra kwargs (its moves)."""
        return {**world_kwargs(self.scene, self.state_text), **(self.env_kwargs or {})}
