"""Which world a command plays: the env, the grid's scene (a bundled layout or a scene
JSON file) and how states read (`--state-text`). One definition of the two options and
their checks for every config that takes them (the loop's, the jobs' world part), so
pipeline, collect-pairs, train-critic, bench learn, rollouts and the console's forms
agree on names, help and refusals."""

from __future__ import annotations

import json
from typing import Any, Mapping

from lactchain.config import option
from lactchain.envs.catalog import env_class
from lactchain.envs.scenes import DEFAULT_SCENE, SCENES, get_scene, is_scene_file

STATE_TEXT_DEFAULT = "egocentric"


def scene_names() -> tuple[str, ...]:
    return tuple(SCENES)


def scene_field(default: str | None = None) -> Any:
    return option(default, "The grid's scene: " + ", ".join(SCENES) + " (empty: the default 4x4; flat: 8x8 with "
                           "furniture; rooms: 8x8 four rooms with doorways; maze: 6x6 corridors), or a scene JSON "
                           "file (lactchain env show --scene NAME --json prints one to start from).",
                  form="Scene", suggest=scene_names)


def state_text_field() -> Any:
    return option(STATE_TEXT_DEFAULT, "How the grid's states read in prompts and the critic: egocentric (where the "
                                      "goal is from the agent's view) or coords (coordinates only, as in the seed's "
                                      "prompt).", choices=("egocentric", "coords"), form="State text")


def scene_spec(value: str) -> str:
    """A --scene value as recorded: a bundled scene by its own name, a file as given
    (read and validated here); ValueError with the one-line reason otherwise."""
    scene = get_scene(value)
    return value if is_scene_file(value) else scene.name


def check_world(config: Any) -> None:
    """Normalise `config.scene` (a bundled name as the scene's own name; a file read and
    validated) and `config.state_text`, refusing either on an env that has no scenes."""
    grid_only = not getattr(env_class(config.env), "has_scenes", False)
    if config.scene is not None:
        try:
            config.scene = scene_spec(config.scene)
        except ValueError as exc:
            config.refuse("scene", str(exc))
        if grid_only:
            config.refuse("scene", f"scenes are the grid's; drop --scene or use --env grid (not {config.env})")
    if config.state_text != STATE_TEXT_DEFAULT and grid_only:
        config.refuse("state_text", f"is the grid's; drop it or use --env grid (not {config.env})")


def world_params(env: str, scene: str | Mapping[str, Any] | None,
                 state_text: str = STATE_TEXT_DEFAULT) -> dict[str, Any]:
    """The world as a run records it in its params: the env; the scene and the state text
    where not the default (a standalone job's and a pipeline phase's runs alike; the
    console's Lab gives a scene read from a file as the scene itself)."""
    params: dict[str, Any] = {"env": env}
    if scene is not None:
        params["scene"] = scene
    if state_text != STATE_TEXT_DEFAULT:
        params["state_text"] = state_text
    return params


def recorded_world(params: Mapping[str, Any]) -> dict[str, str] | None:
    """The world a run's params record (as `world_params` words it), or None for a run that
    played no env of its own (a train-actor phase, a critic fit from stored steps)."""
    if not params.get("env"):
        return None
    return world_params(str(params["env"]), params.get("scene") or None,
                        str(params.get("state_text") or STATE_TEXT_DEFAULT))


def same_world(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two worlds (as `world_params` words them; the console's may hold the scene it
    read from a file as a dict) play alike: scenes compare by layout, not by name or path (the
    default scene named or left out; a file however its path was typed; an edited copy of a
    bundled scene, still named after it, is another world)."""
    return _world_key(a) == _world_key(b)


def _world_key(world: Mapping[str, Any]) -> tuple[str, str | None, str]:
    scene = world.get("scene") or None
    if scene is not None:
        try:
            layout = {k: v for k, v in get_scene(scene).as_dict().items() if k != "name"}
        except (ValueError, OSError):  # a file that is gone: its path is all there is
            layout = None
        default = {k: v for k, v in get_scene(DEFAULT_SCENE).as_dict().items() if k != "name"}
        scene = None if layout == default else json.dumps(layout, sort_keys=True) if layout else str(scene)
    return str(world["env"]), scene, str(world.get("state_text") or STATE_TEXT_DEFAULT)


def world_label(world: Mapping[str, Any]) -> str:
    """'grid', 'grid flat', 'grid flat, coords text': a world in a few words."""
    scene = world.get("scene")
    scene = scene.get("name") if isinstance(scene, Mapping) else scene
    text = f"{world['env']} {scene}" if scene else str(world["env"])
    return f"{text}, {world['state_text']} text" if world.get("state_text") else text


def world_kwargs(scene: str | None, state_text: str = STATE_TEXT_DEFAULT) -> dict[str, Any]:
    """The env kwargs of a checked world: only what differs from the env's defaults (a
    scene file goes as the scene itself, so every process plays the layout it was given)."""
    out: dict[str, Any] = {}
    if scene is not None:
        out["scene"] = get_scene(scene).as_dict() if is_scene_file(scene) else scene
    if state_text != STATE_TEXT_DEFAULT:
        out["state_text"] = state_text
    return out
