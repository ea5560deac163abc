"""GridWorld where one action is a whole list of moves and earns one reward.

Coordinates: x grows east, y grows north; (0, 0) is the south-west corner. With the
default vocabulary (move forward, turn left) the agent starts at (0, 0) facing east
and the goal is (3, 3): three steps east, turn left, three steps north.

A scene (`lactchain.envs.scenes`: `scene="flat"`, a JSON file, a Scene or its dict) sets
the size, goal and start (explicit arguments win), places walkable landmarks and walls
that block on the grid; they appear in `describe()`, `critic_text()` and both renders.
The default is the "empty" scene: no landmarks, no walls, and every text and render
exactly as without scenes.

`state_text` chooses how a state reads: "egocentric" (the default: where the goal is
from the agent's view, "3 steps ahead and 2 to your left") or "coords" (coordinates
only, as in the seed's prompt: the model must do the arithmetic).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# The rules (poses, one move, rewards) are grid_rules', shared with the planner; the names
# stay importable from here.
from lactchain.envs.grid_rules import (  # noqa: F401 - re-exported
    GLYPHS,
    GOAL_REWARD,
    MOVE_COST,
    ORIENTATIONS,
    STEP,
    MoveOutcome,
    State,
    all_states,
    apply_move,
)
from lactchain.envs.planning import Planner
from lactchain.envs.scenes import MAX_SCENE_SIZE, Landmark, Scene, get_scene
from lactchain.moves import (
    ALL_MOVES, DEFAULT_MOVES, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT, action_moves, format_moves, validate_moves,
)


def _steps(n: int) -> str:
    return f"{n} step{'s' if n != 1 else ''}"


def landmark_sentence(state: State, scene: Scene) -> str:
    """The prompt's landmark sentence: "You are at the sofa." or "You are south-west of
    the sofa, 2 steps from it." (the nearest landmark; "" in a scene without landmarks)."""
    nearest = scene.nearest_landmark((state.x, state.y))
    if nearest is None:
        return ""
    name, relation = nearest
    if relation == "at":
        return f"You are at the {name}."
    return f"You are {relation} the {name}, {_steps(scene.distance((state.x, state.y), name))} from it."


def goal_direction(state: State, goal: tuple[int, int]) -> str:
    """Where the goal is relative to the agent's pose, e.g. "The goal is 2 steps ahead
    and 3 steps to your left." (x grows east, y north)."""
    dx, dy = goal[0] - state.x, goal[1] - state.y
    fx, fy = STEP[state.orientation]
    ahead, left = dx * fx + dy * fy, dy * fx - dx * fy

    def steps(n: int, where: str) -> str:
        return f"{abs(n)} step{'s' if abs(n) != 1 else ''} {where}"

    parts = []
    if ahead:
        parts.append(steps(ahead, "ahead" if ahead > 0 else "behind you"))
    if left:
        parts.append(steps(left, "to your left" if left > 0 else "to your right"))
    return f"The goal is {' and '.join(parts)}." if parts else "You are on the goal."


STATE_TEXTS = ("egocentric", "coords")  # how describe() and critic_text() read a state


def walls_sentence(walls: frozenset[tuple[int, int]]) -> str:
    """The prompt's wall list, the same for every state of a scene ("" without walls).
    describe() puts it before the pose so it joins the prefix that every prompt of a
    batch shares (the actor's cache reuses it): on rooms that cut the per-state part of
    SmolLM2's prompt from 138 tokens to 37."""
    if not walls:
        return ""
    cells = ", ".join(f"(x={x}, y={y})" for x, y in sorted(walls, key=lambda c: (c[1], c[0])))
    return f"Walls at {cells}."


def facing_wall(state: State, walls: frozenset[tuple[int, int]], size: int) -> bool:
    """Whether the cell ahead is a wall or off the grid (a move forward would bump)."""
    dx, dy = STEP[state.orientation]
    x, y = state.x + dx, state.y + dy
    return (x, y) in walls or not (0 <= x < size and 0 <= y < size)


def _as_int(v: Any) -> int:
    # int(1.5) would silently become 1: a non-integral coordinate is an impossible state.
    if isinstance(v, (float, np.floating)) and not float(v).is_integer():
        raise ValueError(f"{v!r} is not a whole number")
    return int(v)


def _as_cell(value: Any, name: str) -> tuple[int, int]:
    try:
        x, y = (_as_int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an (x, y) pair of whole numbers, got {value!r}") from None
    return x, y


def _count_word(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


class GridWorldEnv(gym.Env):
    """Gymnasium env: observation {x, y, orientation}, action = a list of moves.

    Actions may be given as move strings (`["move forward", "turn left"]`) or as
    indices into `self.moves` (what `action_space.sample()` returns).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    observation_label = "Your gridworld"

    def __init__(
        self,
        size: int | None = None,
        start: Sequence[Any] | Mapping[str, Any] | None = None,
        goal: Sequence[int] | None = None,
        moves: Sequence[str] = DEFAULT_MOVES,
        max_actions: int = 20,
        max_moves_per_action: int = 8,
        terminate_on_exit: bool = False,
        exit_penalty: float = -10.0,
        render_mode: str | None = None,
        scene: str | Scene | Mapping[str, Any] | None = None,
        state_text: str = "egocentric",
    ):
        # size, goal and start default to the scene's (the empty scene: 4, (3, 3), (0, 0) east)
        base = get_scene(scene)
        size = base.size if size is None else size
        if int(size) < 2:
            raise ValueError(f"size must be at least 2, got {size}")
        if int(size) > MAX_SCENE_SIZE:
            raise ValueError(f"size must be at most {MAX_SCENE_SIZE}, got {size}")
        self.size = int(size)
        self.moves = tuple(validate_moves(moves))
        if len(set(self.moves)) != len(self.moves) or not self.moves:
            raise ValueError(f"moves must be a non-empty list without repeats, got {list(moves)}")
        self.goal = _as_cell(base.goal if goal is None else goal, "goal")
        self._check_cell(self.goal, "goal")
        self.start = self._parse_state(base.start if start is None else start)
        # The scene as played: the base scene with any explicit size/goal/start (validated
        # again: a landmark must still fit a smaller grid).
        s = self.start
        self.scene: Scene = base if (base.size, base.goal, base.start) == (self.size, self.goal, (s.x, s.y, s.orientation)) \
            else Scene(base.name, self.size, self.goal, (s.x, s.y, s.orientation), base.landmarks, base.walls)
        self.walls: frozenset[tuple[int, int]] = frozenset(self.scene.walls)
        if state_text not in STATE_TEXTS:
            raise ValueError(f"state_text must be one of {', '.join(STATE_TEXTS)}, got {state_text!r}")
        self.state_text = state_text
        if max_actions < 1 or max_moves_per_action < 1:
            raise ValueError("max_actions and max_moves_per_action must be >= 1")
        self.max_actions = int(max_actions)
        self.max_moves_per_action = int(max_moves_per_action)
        self.terminate_on_exit = bool(terminate_on_exit)
        self.exit_penalty = float(exit_penalty)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode

        self.observation_space = spaces.Dict(
            {
                "x": spaces.Discrete(self.size),
                "y": spaces.Discrete(self.size),
                "orientation": spaces.Discrete(len(ORIENTATIONS)),
            }
        )
        self.action_space = spaces.Sequence(spaces.Discrete(len(self.moves)))
        self.state = self.start
        self.actions_taken = 0
        self.path: list[State] = [self.start]

    # ---- validation -------------------------------------------------------------
    def _check_cell(self, cell: tuple[int, int], name: str) -> None:
        x, y = cell
        if not (0 <= x < self.size and 0 <= y < self.size):
            raise ValueError(f"{name} {cell} is outside the {self.size}x{self.size} grid")

    def _parse_state(self, value: Any) -> State:
        if isinstance(value, State):
            raw = value.as_dict()
        elif isinstance(value, Mapping):
            raw = dict(value)
        else:
            try:
                x, y, o = value
            except (TypeError, ValueError):
                raise ValueError(f"state must be {{x, y, orientation}}, got {value!r}") from None
            raw = {"x": x, "y": y, "orientation": o}
        missing = {"x", "y", "orientation"} - set(raw)
        if missing:
            raise ValueError(f"state {value!r} is missing {sorted(missing)}")
        orientation = raw["orientation"]
        if isinstance(orientation, (int, np.integer)) and 0 <= int(orientation) < 4:
            orientation = ORIENTATIONS[int(orientation)]
        orientation = str(orientation).strip().lower()
        if orientation not in ORIENTATIONS:
            raise ValueError(f"orientation {raw['orientation']!r} is not one of {', '.join(ORIENTATIONS)}")
        x, y = _as_cell((raw["x"], raw["y"]), "state")
        self._check_cell((x, y), "state")
        if (x, y) in getattr(self, "walls", ()):
            raise ValueError(f"state ({x}, {y}) is inside a wall of scene {self.scene.name!r}")
        return State(x, y, orientation)

    def _to_moves(self, action: Iterable[Any]) -> list[str]:
        return action_moves(action, self.moves)

    # ---- the text-env seam (lactchain.envs.catalog.TextEnv) ---------------------
    name = "grid"  # its key in lactchain.envs.catalog.ENVS
    stochastic = False  # a move list from a state always has the same outcome
    judge_description = "A grid world: you move forward or turn, and want to reach the goal cell in as few moves " \
                        "as possible."
    judge_goal = "reach the goal quickly"
    outcome_words = ("reached the goal", "did not reach the goal")
    has_scenes = True  # takes `scene=` (lactchain.envs.scenes)
    classic_kwargs = {"max_moves_per_action": 1, "max_actions": 30}  # one move per action, room for the moves
    transfer = ("5x5", {"size": 5, "goal": (4, 4)})  # zero-shot transfer: the 4x4's actor on a 5x5 grid
    console_view = "grid"  # the console's GridView (cells, goal, landmarks, value overlay)
    lab_blurb = "The Lab plays the GridWorld: choose the start on the grid"

    def state_features(self, state: State) -> np.ndarray:
        """11 numbers for the classic agents: x, y (/(size-1)); orientation one-hot (north,
        east, south, west); goal dx, dy (/(size-1)); the goal in the agent's frame, ahead and
        to its left (/(size-1)); 1 if the cell ahead is off the grid or a wall (a forward move would bump)."""
        span = max(self.size - 1, 1)
        fx, fy = STEP[state.orientation]
        dx, dy = self.goal[0] - state.x, self.goal[1] - state.y
        ahead, left = dx * fx + dy * fy, dy * fx - dx * fy  # left of (fx, fy) is (-fy, fx)
        nx, ny = state.x + fx, state.y + fy
        blocked = not (0 <= nx < self.size and 0 <= ny < self.size) or (nx, ny) in self.walls
        onehot = [float(state.orientation == o) for o in ORIENTATIONS]
        return np.array([state.x / span, state.y / span, *onehot, dx / span, dy / span,
                         ahead / span, left / span, float(blocked)], dtype=np.float32)

    def vocabulary_texts(self) -> list[str]:
        """The grid's prompts (every move menu), descriptions (every size 2..16, every goal
        direction phrase), coordinates and move words: the tiny tokenizer's grid words."""
        from lactchain.prompts import DEFAULT_STRATEGY, render_prompt

        texts = [DEFAULT_STRATEGY]
        for moves in (DEFAULT_MOVES, ALL_MOVES, ALL_MOVES[:1]):
            texts.append(render_prompt(DEFAULT_STRATEGY, "", moves))
            texts.append(format_moves(list(moves)))
        for size in range(2, 17):
            env = GridWorldEnv(size=size, goal=(size - 1, size - 1))
            env.reset()
            texts.append(env.describe())
        texts.extend(GridWorldEnv().describe(s) for s in all_states(4))  # every goal direction phrase
        texts.append(" ".join(ORIENTATIONS) + " " + " ".join(o.capitalize() for o in ORIENTATIONS))
        words = [w for m in ALL_MOVES for w in m.split()]
        texts.append(" ".join(words) + " " + " ".join(w.capitalize() for w in words))
        texts.append(" ".join(f"(x={n}, y={n})" for n in range(100)))  # coordinates without a space
        texts.append(" ".join(f"{n}x{n}" for n in range(1, 33)))
        return texts

    def render_text(self) -> str:
        """The live episode as text (what `render()` gives in 'ansi' mode, any render_mode)."""
        return render_ansi(self.size, self.state, self.goal, self.path, self.scene.landmarks, self.walls)

    def headline(self, state: State) -> str:
        """The state in one line for the console: the pose and where the goal is."""
        return f"at {state} · {goal_direction(state, self.goal)}"

    all_moves = ALL_MOVES  # every move a grid can be given (an instance plays `moves`, a subset)

    @classmethod
    def plan_from_prompt(cls, prompt: str) -> list[str] | None:
        """The planner's optimal move list for the pose and goal a prompt describes (its
        size, pose, egocentric goal text and move menu), for the console's model-free
        oracle actor; [] when the goal cannot be read or reached; None when the prompt
        is not a grid's."""
        size, pose = _SIZE_RE.search(prompt), _POSE_RE.search(prompt)
        if not (size and pose) or pose.group(3).lower() not in STEP:
            return None
        state = State(int(pose.group(1)), int(pose.group(2)), pose.group(3).lower())
        goal = _goal_from(prompt, state)
        if goal is None:
            return []
        menu = [m for m in _MENU_RE.findall(prompt) if m in ALL_MOVES] or None
        listed = _WALLS_RE.search(prompt)
        walls = [(int(x), int(y)) for x, y in _CELL_RE.findall(listed.group(1))] if listed else []
        try:
            scene = Scene("prompt", int(size.group(1)), goal, (state.x, state.y, state.orientation), walls=tuple(walls))
            env = cls(scene=scene, moves=menu or ALL_MOVES[:2])
            return Planner(env).plan(state)
        except ValueError:
            return []

    def critic_text(self, state: State) -> str:
        """The critic's compact state text: only what tells states apart, so mean pooling
        is not drowned in the ~30 tokens every prompt shares. With `state_text="coords"`
        it is the seed's state, {x, y, orientation}, and the goal's cell."""
        if self.state_text == "coords":
            text = f"{{x: {state.x}, y: {state.y}, orientation: {state.orientation}}}; goal {{x: {self.goal[0]}, " \
                   f"y: {self.goal[1]}}}; grid {self.size}x{self.size}"
        else:
            text = f"x={state.x} y={state.y} facing {state.orientation}; goal x={self.goal[0]} y={self.goal[1]}; " \
                   f"grid {self.size}x{self.size}"
        nearest = self.scene.nearest_landmark((state.x, state.y))
        if nearest is not None:  # only scenes with landmarks: the empty scene's text is unchanged
            text += f"; scene {self.scene.name}: {nearest[1]} {nearest[0]}"
        if self.walls:  # the layout is the scene's; what the agent faces is the state's
            text += f"; Walls {self.scene.name}" + ("; facing a wall" if facing_wall(state, self.walls, self.size) else "")
        return text

    # Sentences the strategy search's `edits` proposer inserts (hand-written, lactchain.strategy.search).
    strategy_hints = ("Read where the goal is: ahead, behind, to your left or to your right.",
                      "Turn toward the goal before moving forward.",
                      "To turn right, turn left three times.",
                      "Move forward once for every step the goal is ahead of you.",
                      "When the goal is behind you, turn left twice.",
                      "Do not turn more than you need to.",
                      "Give all the moves needed to reach the goal in one answer.",
                      "If you are facing a wall, turn before moving forward.")

    @property
    def default_strategy(self) -> str:
        from lactchain.prompts import DEFAULT_STRATEGY

        return DEFAULT_STRATEGY

    @property
    def fixed_start(self) -> State:
        return self.start

    def start_states(self) -> list[State]:
        """Every non-goal pose off the walls (a start on the goal would be a free success)."""
        return [s for s in all_states(self.size, self.walls) if not self.is_terminal(s)]

    def parse_state(self, value: Any) -> State:
        return self._parse_state(value)

    def is_terminal(self, state: State) -> bool:
        return (state.x, state.y) == tuple(self.goal)

    def solver(self) -> Planner:
        return Planner(self)

    # ---- gymnasium API ----------------------------------------------------------
    def _obs(self) -> dict[str, int]:
        s = self.state
        return {"x": s.x, "y": s.y, "orientation": ORIENTATIONS.index(s.orientation)}

    def describe(self, state: State | None = None) -> str:
        """Text for prompts: the grid, where the agent is, and where the goal is as the
        agent sees it (ahead/behind, left/right). Why egocentric: a small LLM maps "2
        steps ahead and 3 to your left" to moves almost word for word, while absolute
        coordinates need arithmetic; fine-tuning SmolLM2 on planner plans reached 22/60
        exact plans after 50 steps with this text vs 2/60 with coordinates alone."""
        s = state or self.state
        goal = f"The goal is at (x={self.goal[0]}, y={self.goal[1]})." if self.state_text == "coords" \
            else goal_direction(s, self.goal)
        # The scene's fixed text (walls) first, then the state's: see walls_sentence.
        # Every optional part is "" in the empty scene, whose text is unchanged.
        facing = "You are facing a wall." if self.walls and facing_wall(s, self.walls, self.size) else ""
        parts = [f"The grid world is {self.size}x{self.size}.", walls_sentence(self.walls),
                 f"You are at (x={s.x}, y={s.y}) facing {s.orientation}.", goal, landmark_sentence(s, self.scene), facing]
        return " ".join(p for p in parts if p)

    def _info(self, caption: str, **extra: Any) -> dict[str, Any]:
        return {
            "state": self.state.as_dict(),
            "description": self.describe(),
            "caption": caption,
            "actions_taken": self.actions_taken,
            **extra,
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        self.state = self._parse_state(options["state"]) if options.get("state") is not None else self.start
        self.actions_taken = 0
        self.path = [self.state]
        info = self._info(f"start at {self.state}")
        if (self.state.x, self.state.y) == self.goal:
            info["caption"] += " (already at the goal)"
        return self._obs(), info

    def step(self, action: Iterable[Any]):
        moves = self._to_moves(action)
        dropped = max(0, len(moves) - self.max_moves_per_action)
        moves = moves[: self.max_moves_per_action]
        self.actions_taken += 1
        reward, executed, terminated = 0.0, 0, False
        events: list[str] = []
        reached_goal = exited = False
        if (self.state.x, self.state.y) == self.goal:
            moves, terminated, reached_goal = [], True, True
            events.append("already at the goal")
        for move in moves:
            outcome = apply_move(self.state, move, self.size, self.terminate_on_exit, self.walls)
            executed += 1
            reward += MOVE_COST
            self.state = outcome.state
            self.path.append(self.state)
            events.append(f"bumped the {outcome.bumped} wall" if outcome.bumped else move)
            if outcome.exited:
                reward += self.exit_penalty
                events[-1] = "walked off the grid"
                terminated = exited = True
                break
            if (self.state.x, self.state.y) == self.goal:
                reward += GOAL_REWARD
                events.append("reached the goal")
                terminated = reached_goal = True
                break
        truncated = not terminated and self.actions_taken >= self.max_actions
        caption = _caption(events) or "did nothing (empty move list)"
        if dropped:
            caption += f"; {dropped} extra move{'s' if dropped > 1 else ''} ignored (limit {self.max_moves_per_action})"
        if truncated:
            caption += f"; out of actions ({self.max_actions})"
        info = self._info(
            caption,
            moves=moves,
            moves_executed=executed,
            moves_dropped=dropped,
            reached_goal=reached_goal,
            success=reached_goal,
            exited=exited,
        )
        return self._obs(), reward, terminated, truncated, info

    # ---- rendering --------------------------------------------------------------
    def render(self):
        if self.render_mode == "ansi":
            return render_ansi(self.size, self.state, self.goal, self.path, self.scene.landmarks, self.walls)
        if self.render_mode == "rgb_array":
            return render_rgb(self.size, self.state, self.goal, self.path, landmarks=self.scene.landmarks,
                              walls=self.walls)
        return None


_SIZE_RE = re.compile(r"grid world is (\d+)x(\d+)", re.I)
_GOAL_RE = re.compile(r"goal is at \(x=(\d+), y=(\d+)\)", re.I)  # absolute, if a prompt says so
_AHEAD_RE = re.compile(r"(\d+) steps? (ahead|behind you)", re.I)  # the env's egocentric text
_SIDE_RE = re.compile(r"(\d+) steps? to your (left|right)", re.I)
_POSE_RE = re.compile(r"You are at \(x=(\d+), y=(\d+)\) facing (\w+)", re.I)
_WALLS_RE = re.compile(r"Walls at (.*?)\.(?:\s|$)", re.S)
_CELL_RE = re.compile(r"\(x=(\d+), y=(\d+)\)")
_MENU_RE = re.compile(r"^\s*\d+\.\s*(.+?)\s*$", re.M)


def _goal_from(prompt: str, state: State) -> tuple[int, int] | None:
    """The goal cell a prompt describes: absolute "(x=.., y=..)" or the env's egocentric
    "N steps ahead/behind you and M steps to your left/right" from `state`."""
    absolute = _GOAL_RE.search(prompt)
    if absolute:
        return int(absolute.group(1)), int(absolute.group(2))
    if "you are on the goal" in prompt.lower():
        return state.x, state.y
    ahead, side = _AHEAD_RE.search(prompt), _SIDE_RE.search(prompt)
    if not (ahead or side):
        return None
    a = int(ahead.group(1)) * (1 if ahead.group(2).lower() == "ahead" else -1) if ahead else 0
    left = int(side.group(1)) * (1 if side.group(2).lower() == "left" else -1) if side else 0
    fx, fy = STEP[state.orientation]
    return state.x + a * fx - left * fy, state.y + a * fy + left * fx


def _caption(events: list[str]) -> str:
    """Collapse runs of the same event: "moved forward twice, bumped the north wall"."""
    words = {MOVE_FORWARD: "moved forward", TURN_LEFT: "turned left", TURN_RIGHT: "turned right"}
    parts: list[str] = []
    i = 0
    while i < len(events):
        j = i
        while j < len(events) and events[j] == events[i]:
            j += 1
        text = words.get(events[i], events[i])
        parts.append(text if j - i == 1 else f"{text} {_count_word(j - i)}")
        i = j
    return ", ".join(parts)


def render_ansi(size: int, state: State, goal: tuple[int, int], path: Sequence[State] = (),
                landmarks: Sequence[Landmark] = (), walls: Iterable[tuple[int, int]] = ()) -> str:
    """Text grid, north at the top: agent glyph ^ > v <, goal G, walls ###, landmark cells
    their letter (a legend line names them), other visited cells '.'."""
    walls = frozenset(walls)
    visited = {(s.x, s.y) for s in path}
    letters = {cell: m.letter for m in landmarks for cell in m.cells}
    rows = []
    for y in range(size - 1, -1, -1):
        cells = []
        for x in range(size):
            if (x, y) in walls:
                cells.append(WALL_CELL)
                continue
            if (x, y) == (state.x, state.y):
                cells.append(GLYPHS[state.orientation])
            elif (x, y) == tuple(goal):
                cells.append("G")
            elif (x, y) in letters:
                cells.append(letters[(x, y)])
            elif (x, y) in visited:
                cells.append(".")
            else:
                cells.append(" ")
        rows.append(f"{y} |" + "|".join(c if c == WALL_CELL else f" {c} " for c in cells) + "|")
    border = "  +" + "+".join(["---"] * size) + "+"
    axis = "    " + "   ".join(str(x) for x in range(size))
    out = [border]
    for row in rows:
        out.extend([row, border])
    out.append(axis)
    if landmarks:
        out.append("  " + ", ".join(f"{m.letter} {m.name}" for m in landmarks))
    return "\n".join(out)


WALL_CELL = "###"  # a wall in the ANSI grid (a whole cell)
WALL_RGB = (60, 60, 60)


def render_rgb(size: int, state: State, goal: tuple[int, int], path: Sequence[State] = (), cell: int = 32,
               landmarks: Sequence[Landmark] = (), walls: Iterable[tuple[int, int]] = ()) -> np.ndarray:
    """RGB image: grey grid, dark grey walls, green goal, pale visited cells, landmark cells
    in their colour (a pale square in the middle once visited), blue agent with a red nose."""
    img = np.full((size * cell, size * cell, 3), 240, dtype=np.uint8)

    def box(x: int, y: int) -> tuple[slice, slice]:
        row = size - 1 - y
        return slice(row * cell + 1, (row + 1) * cell - 1), slice(x * cell + 1, (x + 1) * cell - 1)

    for s in path:
        img[box(s.x, s.y)] = (210, 225, 245)
    visited = {(s.x, s.y) for s in path}
    inset = cell // 4
    for mark in landmarks:
        for x, y in mark.cells:
            rows, cols = box(x, y)
            img[rows, cols] = mark.rgb
            if (x, y) in visited:
                img[rows.start + inset : rows.stop - inset, cols.start + inset : cols.stop - inset] = (210, 225, 245)
    for x, y in walls:
        img[box(x, y)] = WALL_RGB
    img[box(*goal)] = (60, 180, 75)
    img[box(state.x, state.y)] = (40, 80, 200)
    rows, cols = box(state.x, state.y)
    cy, cx = (rows.start + rows.stop) // 2, (cols.start + cols.stop) // 2
    dx, dy = STEP[state.orientation]
    ny, nx = cy - dy * (cell // 3), cx + dx * (cell // 3)
    img[ny - 3 : ny + 3, nx - 3 : nx + 3] = (220, 40, 40)
    img[:: cell, :] = 120
    img[:, :: cell] = 120
    return img
