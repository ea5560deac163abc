"""Config parts many jobs share: which actor, which env, which strategy. Each is a
Config nested in a job's config and flattened into its options and params."""

from __future__ import annotations

from dataclasses import dataclass

from lactchain.config import Config, option

ACTOR_HELP = "Actor preset (tiny, smollm2-135m, mistral-7b-instruct), local path or hub id."
ADAPTER_HELP = "LoRA adapter: a train-actor run id or an adapter folder."
STRATEGY_HELP = ("Strategy prompt: a version saved in the registry (the console's editor, ctrl+s) or a text file. "
                 "Recorded in the run's params. Default: the built-in strategy.")
SEED_MAX = 2**32 - 1


def env_choices() -> tuple[str, ...]:
    from lactchain.envs.catalog import ENVS

    return tuple(ENVS)


@dataclass
class ActorPart(Config):
    """The actor model and the adapter it starts from."""

    actor: str = option("smollm2-135m", ACTOR_HELP, form="Actor")
    adapter: str | None = option(None, ADAPTER_HELP, check="run:actor", form="Adapter run")


@dataclass
class EnvPart(Config):
    """The environment (its short name or gymnasium id) and, for envs with scenes, the scene."""

    env: str = option("grid", "Environment: a short name (lactchain env list) or its gymnasium id.",
                      form="Environment", suggest=env_choices)

    def check(self) -> None:
        from lactchain.envs.catalog import normalize_env_field

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
        if not env_takes_scenes(self.env):
            self.refuse("scene", f"scenes are the grid's; drop --scene or use --env grid (not {self.env})")

    def record_params(self) -> dict[str, str]:
        return {"env": self.env, **self.env_kwargs()}

    def env_kwargs(self) -> dict[str, str]:
        return {} if self.scene is None else {"scene": self.scene}


def env_takes_scenes(name: str) -> bool:
    """Whether an env takes a `scene` (asked of the env's class)."""
    from lactchain.envs.catalog import env_class

    return bool(getattr(env_class(name), "has_scenes", False))


@dataclass
class StrategyPart(Config):
    """The strategy prompt the actor reads."""

    strategy: str | None = option(None, STRATEGY_HELP, check="strategy", form="Strategy")
