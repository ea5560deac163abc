"""Config parts many jobs share: which actor, which env, which strategy. Each is a
Config nested in a job's config and flattened into its options and params."""

from __future__ import annotations

from dataclasses import dataclass

from lactchain.config import Config, option
from lactchain.envs.catalog import env_class, env_field, normalize_env_field

ACTOR_HELP = "Actor preset (tiny, smollm2-135m, mistral-7b-instruct), local path or hub id."
ADAPTER_HELP = "LoRA adapter: a train-actor run id or an adapter folder."
STRATEGY_HELP = ("Strategy prompt: a version saved in the registry (the console's editor, ctrl+s) or a text file. "
                 "Recorded in the run's params. Default: the built-in strategy.")
SEED_MAX = 2**32 - 1


@dataclass
class ActorPart(Config):
    """The actor model and the adapter it starts from."""

    actor: str = option("smollm2-135m", ACTOR_HELP, form="Actor")
    adapter: str | None = option(None, ADAPTER_HELP, check="run:actor", form="Adapter run")


@dataclass
class EnvPart(Config):
    """The environment (its short name or gymnasium id) and, for envs with scenes, the scene."""

    env: str = env_field()

    def check(self) -> None:
        normalize_env_field(self)


@dataclass
class SceneEnvPart(EnvPart):
    """An env that may take a scene (the grid's layouts)."""

    scene: str | None = option(None, "The grid's scene: empty (the default 4x4) or flat (8x8 with a fridge, a "
                                     "bathtub, a sofa and a bed).")

    def check(self) -> None:
        super().check()
        if self.scene is None:
            return
        from lactchain.envs.scenes import get_scene

        try:
            self.scene = get_scene(self.scene).name
        except ValueError as exc:
            self.refuse("scene", str(exc))
        if not getattr(env_class(self.env), "has_scenes", False):
            self.refuse("scene", f"scenes are the grid's; drop --scene or use --env grid (not {self.env})")

    def record_params(self) -> dict[str, str]:
        return {"env": self.env, **self.env_kwargs()}

    def env_kwargs(self) -> dict[str, str]:
        return {} if self.scene is None else {"scene": self.scene}


@dataclass
class StrategyPart(Config):
    """The strategy prompt the actor reads."""

    strategy: str | None = option(None, STRATEGY_HELP, check="strategy", form="Strategy")
