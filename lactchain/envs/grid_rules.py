"""The grid's pure rules, shared by the env (gridworld) and its exact planner (planning):
the agent's pose, one move's transition, the rewards and every pose of a grid.

Grid-only by nature. It imports neither of the two modules that use it, so the env
can build its planner and the planner can read the rules without an import cycle.
Coordinates: x grows east, y grows north; (0, 0) is the south-west corner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lactchain.moves import MOVE_FORWARD, TURN_LEFT, TURN_RIGHT

ORIENTATIONS: tuple[str, ...] = ("north", "east", "south", "west")
STEP = {"north": (0, 1), "east": (1, 0), "south": (0, -1), "west": (-1, 0)}  # (dx, dy) of one forward move per orientation
GLYPHS = {"north": "^", "east": ">", "south": "v", "west": "<"}
GOAL_REWARD = 100.0
MOVE_COST = -1.0


@dataclass(frozen=True)
class State:
    """Agent pose. Hashable, so planners and samplers can key on it."""

    x: int
    y: int
    orientation: str

    def as_dict(self) -> dict[str, Any]:
        return {"x": self.x, "y": self.y, "orientation": self.orientation}

    def short(self) -> str:
        """The pose in a table cell: '(0,3)E'."""
        return f"({self.x},{self.y}){self.orientation[0].upper()}"

    def __str__(self) -> str:
        return f"(x={self.x}, y={self.y}, facing {self.orientation})"


@dataclass(frozen=True)
class MoveOutcome:
    """The result of one move: where the agent ends up and what got in its way."""

    state: State
    bumped: str | None = None  # the wall hit while clamping, e.g. "north"
    exited: bool = False  # left the grid (terminate-on-exit mode)


def apply_move(state: State, move: str, size: int, terminate_on_exit: bool = False,
               walls: frozenset[tuple[int, int]] | set[tuple[int, int]] = frozenset()) -> MoveOutcome:
    """Pure transition of one move; shared by the env and the exact planner. A forward move
    into a wall cell bumps (stays put), like one into the border without terminate_on_exit."""
    idx = ORIENTATIONS.index(state.orientation)
    if move == TURN_LEFT:
        return MoveOutcome(State(state.x, state.y, ORIENTATIONS[(idx - 1) % 4]))
    if move == TURN_RIGHT:
        return MoveOutcome(State(state.x, state.y, ORIENTATIONS[(idx + 1) % 4]))
    if move != MOVE_FORWARD:
        raise ValueError(f"unknown move {move!r}")
    dx, dy = STEP[state.orientation]
    nx, ny = state.x + dx, state.y + dy
    if (nx, ny) in walls:
        return MoveOutcome(state, bumped=state.orientation)
    if 0 <= nx < size and 0 <= ny < size:
        return MoveOutcome(State(nx, ny, state.orientation))
    if terminate_on_exit:
        return MoveOutcome(state, exited=True)
    return MoveOutcome(state, bumped=state.orientation)


def all_states(size: int, walls: frozenset[tuple[int, int]] | set[tuple[int, int]] = frozenset()) -> list[State]:
    """Every (x, y, orientation) of a size x size grid off the walls, in a fixed order."""
    return [State(x, y, o) for y in range(size) for x in range(size) if (x, y) not in walls for o in ORIENTATIONS]
