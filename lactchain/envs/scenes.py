"""Scenes: what the grid's cells mean. A scene fixes the grid's size, goal and start and
places named landmarks (a fridge, a sofa, ...) on its cells, each with a colour and a
letter for the renders.

Walls (`Scene.walls`, cells) block: a forward move into one bumps, like the border, and
the planner routes around them. A scene's every open cell must reach the goal, so every
start state can succeed. Landmarks are walkable: they give positions meaning ("north of the fridge", "at the
sofa") without changing the dynamics, so the move rules, the rewards and the exact
planner are those of the bare grid, and an agent may stand "at the sofa" or cross the
bathtub. The goal and the start may lie on a landmark.

Relations (`Scene.relation`, `Scene.nearest_landmark`), the vocabulary behaviour
descriptors and annotations are computed in:

- distance from a cell to a landmark = the Manhattan distance (moves needed, turns
  aside) to the landmark's nearest cell; ties between cells of one landmark go to the
  first in its `cells` order;
- the relation is "at" on one of the landmark's cells, else the compass direction of the
  cell from that nearest landmark cell: "north of", "south-west of", ... (x grows east, y
  north). For a rectangular landmark this is the cell's side of the rectangle: a cell
  level with the sofa's span is "north of" it, one beyond a corner "north-east of" it;
- the nearest landmark of a cell is the one at the smallest distance, ties broken by
  name (alphabetical), so the answer does not depend on the order the scene lists them.

Bundled: "empty" (the default 4x4 grid: start (0, 0) facing east, goal (3, 3), no
landmarks), "flat" (8x8 with a fridge, a bathtub, a sofa and a bed), "rooms" (8x8,
four rooms joined by four doorways) and "maze" (6x6 corridors). A scene goes to JSON
and back (`as_dict` / `from_dict`, `load_scene_file`) so a stored trajectory can carry
the exact scene it was played in and a user can bring their own (`--scene my.json`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

# Same order and names as lactchain.envs.gridworld.ORIENTATIONS (this module imports
# nothing of the env, which imports it; tests/test_scenes.py checks they agree).
_ORIENTATIONS = ("north", "east", "south", "west")
AT = "at"
RELATIONS: tuple[str, ...] = (AT, "north of", "north-east of", "east of", "south-east of", "south of",
                              "south-west of", "west of", "north-west of")
RESERVED_LETTERS = frozenset("G")  # the goal's letter in every render
# Largest side a scene may declare: the actor reads the whole grid as text (a 64x64 grid is
# already ~4k cells of prompt), and a crafted size must be refused before any cell is listed.
MAX_SCENE_SIZE = 64
_COLOUR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")

Cell = tuple[int, int]


def _int(value: Any, what: str) -> int:
    """int(value) when that is exact (3, 3.0, numpy ints); a ValueError naming `what` otherwise."""
    try:
        number = int(value)
        exact = not isinstance(value, (bool, str, bytes)) and number == value
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return number


def _cell(value: Any, what: str) -> Cell:
    try:
        x, y = value
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an (x, y) pair, got {value!r}") from None
    return _int(x, what), _int(y, what)


@dataclass(frozen=True)
class Landmark:
    """A named object on the grid: the cells it occupies, its colour ("#rrggbb") and the
    letter the renders mark its cells with (default: its name's first letter, upper case)."""

    name: str
    cells: tuple[Cell, ...]
    colour: str
    letter: str = ""

    def __post_init__(self) -> None:
        name = str(self.name).strip() if isinstance(self.name, str) else ""
        if not name:
            raise ValueError(f"a landmark needs a name, got {self.name!r}")
        object.__setattr__(self, "name", name)
        if isinstance(self.cells, (str, bytes)) or not isinstance(self.cells, Iterable):
            raise ValueError(f"landmark {name!r}: cells must be a list of (x, y) pairs, got {self.cells!r}")
        cells = tuple(_cell(c, f"landmark {name!r} cell") for c in self.cells)
        if not cells:
            raise ValueError(f"landmark {name!r} has no cells")
        if len(set(cells)) != len(cells):
            raise ValueError(f"landmark {name!r} lists a cell twice: {list(cells)}")
        object.__setattr__(self, "cells", cells)
        if not isinstance(self.colour, str) or not _COLOUR_RE.match(self.colour):
            raise ValueError(f"landmark {name!r}: colour must be '#rrggbb', got {self.colour!r}")
        object.__setattr__(self, "colour", self.colour.lower())
        letter = (self.letter or name[0]).upper() if isinstance(self.letter, str) else self.letter
        if not (isinstance(letter, str) and len(letter) == 1 and "A" <= letter <= "Z"):
            raise ValueError(f"landmark {name!r}: letter must be one letter A-Z, got {self.letter!r}")
        if letter in RESERVED_LETTERS:
            raise ValueError(f"landmark {name!r}: letter {letter!r} marks the goal; give it another letter")
        object.__setattr__(self, "letter", letter)
        if not _connected(cells):
            raise ValueError(f"landmark {name!r}: its cells {list(cells)} are not one connected piece")

    @property
    def rgb(self) -> tuple[int, int, int]:
        c = self.colour
        return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)

    def nearest_cell(self, cell: Cell) -> tuple[Cell, int]:
        """The landmark cell nearest to `cell` (Manhattan; first in `cells` on ties) and its distance."""
        x, y = cell
        best = min(self.cells, key=lambda c: abs(c[0] - x) + abs(c[1] - y))
        return best, abs(best[0] - x) + abs(best[1] - y)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cells": [list(c) for c in self.cells], "colour": self.colour, "letter": self.letter}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Landmark":
        if not isinstance(data, Mapping):
            raise ValueError(f"a landmark must be a mapping with name, cells and colour, got {data!r}")
        missing = [k for k in ("name", "cells", "colour") if k not in data]
        if missing:
            raise ValueError(f"landmark {data.get('name', '?')!r} is missing {missing}")
        return cls(data["name"], data["cells"], data["colour"], data.get("letter") or "")


def _connected(cells: tuple[Cell, ...]) -> bool:
    todo, seen = [cells[0]], {cells[0]}
    members = set(cells)
    while todo:
        x, y = todo.pop()
        for n in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if n in members and n not in seen:
                seen.add(n)
                todo.append(n)
    return len(seen) == len(members)


def compass(dx: int, dy: int) -> str:
    """The relation of an offset (cell minus landmark cell): "at", "north of", "south-west of"..."""
    ns = "north" if dy > 0 else "south" if dy < 0 else ""
    ew = "east" if dx > 0 else "west" if dx < 0 else ""
    if not (ns or ew):
        return AT
    return "-".join(p for p in (ns, ew) if p) + " of"


@dataclass(frozen=True)
class Scene:
    """A grid's size, goal, start (x, y, orientation) and landmarks, validated: every cell
    inside the grid, landmarks with distinct names and letters, no cell shared by two."""

    name: str
    size: int = 4
    goal: Cell = (3, 3)
    start: tuple[int, int, str] = (0, 0, "east")
    landmarks: tuple[Landmark, ...] = ()
    walls: tuple[Cell, ...] = ()
    _by_cell: dict[Cell, Landmark] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        name = str(self.name).strip() if isinstance(self.name, str) else ""
        if not name:
            raise ValueError(f"a scene needs a name, got {self.name!r}")
        object.__setattr__(self, "name", name)
        size = _int(self.size, f"scene {name!r}: size")
        if size < 2:
            raise ValueError(f"scene {name!r}: size must be at least 2, got {size}")
        if size > MAX_SCENE_SIZE:
            raise ValueError(f"scene {name!r}: size must be at most {MAX_SCENE_SIZE}, got {size}")
        object.__setattr__(self, "size", size)
        goal = _cell(self.goal, f"scene {name!r}: goal")
        self._inside(goal, "the goal")
        object.__setattr__(self, "goal", goal)
        start = self.start
        if isinstance(start, Mapping):
            start = tuple(start.get(k) for k in ("x", "y", "orientation"))
        try:
            sx, sy, so = start
        except (TypeError, ValueError):
            raise ValueError(f"scene {name!r}: start must be (x, y, orientation), got {self.start!r}") from None
        sx, sy = _cell((sx, sy), f"scene {name!r}: start")
        so = str(so).strip().lower()
        if so not in _ORIENTATIONS:
            raise ValueError(f"scene {name!r}: start orientation {start[2]!r} is not one of {', '.join(_ORIENTATIONS)}")
        self._inside((sx, sy), "the start")
        object.__setattr__(self, "start", (sx, sy, so))
        marks = tuple(m if isinstance(m, Landmark) else Landmark.from_dict(m) for m in self.landmarks)
        object.__setattr__(self, "landmarks", marks)
        by_cell: dict[Cell, Landmark] = {}
        names: dict[str, str] = {}
        letters: dict[str, str] = {}
        for mark in marks:
            key = mark.name.lower()
            if key in names:
                raise ValueError(f"scene {name!r}: two landmarks are called {mark.name!r}")
            names[key] = mark.name
            if mark.letter in letters:
                raise ValueError(f"scene {name!r}: {mark.name!r} and {letters[mark.letter]!r} share the letter "
                                 f"{mark.letter!r}; give one of them another letter")
            letters[mark.letter] = mark.name
            for cell in mark.cells:
                self._inside(cell, f"landmark {mark.name!r} cell")
                if cell in by_cell:
                    raise ValueError(f"scene {name!r}: {mark.name!r} and {by_cell[cell].name!r} overlap at {cell}")
                by_cell[cell] = mark
        object.__setattr__(self, "_by_cell", by_cell)
        object.__setattr__(self, "walls", self._checked_walls(by_cell))

    def _checked_walls(self, by_cell: dict[Cell, Landmark]) -> tuple[Cell, ...]:
        """The walls as sorted cells: inside the grid, each once, off the goal, the start and
        every landmark, and leaving every open cell a way to the goal."""
        name = self.name
        if isinstance(self.walls, (str, bytes, Mapping)) or not isinstance(self.walls, Iterable):
            raise ValueError(f"scene {name!r}: walls must be a list of (x, y) cells, got {self.walls!r}")
        walls: set[Cell] = set()
        for raw in self.walls:
            cell = _cell(raw, f"scene {name!r}: wall")
            self._inside(cell, "wall")
            if cell in walls:
                raise ValueError(f"scene {name!r}: wall {cell} is listed twice")
            if cell == self.goal:
                raise ValueError(f"scene {name!r}: a wall on the goal {cell}; move the goal or the wall")
            if cell == self.start[:2]:
                raise ValueError(f"scene {name!r}: a wall on the start {cell}; move the start or the wall")
            if cell in by_cell:
                raise ValueError(f"scene {name!r}: wall {cell} overlaps the {by_cell[cell].name}")
            walls.add(cell)
        cut_off = sorted(set(self.open_cells(walls)) - _reachable(self.goal, walls, self.size))
        if cut_off:
            shown = ", ".join(map(str, cut_off[:4])) + (f" and {len(cut_off) - 4} more" if len(cut_off) > 4 else "")
            raise ValueError(f"scene {name!r}: the goal is unreachable from {shown}; open a way or wall them in")
        return tuple(sorted(walls))

    def open_cells(self, walls: Iterable[Cell] | None = None) -> list[Cell]:
        """Every cell that is not a wall, row by row from (0, 0)."""
        blocked = set(self.walls if walls is None else walls)
        return [(x, y) for y in range(self.size) for x in range(self.size) if (x, y) not in blocked]

    def _inside(self, cell: Cell, what: str) -> None:
        x, y = cell
        if not (0 <= x < self.size and 0 <= y < self.size):
            raise ValueError(f"scene {self.name!r}: {what} {cell} is outside the {self.size}x{self.size} grid")

    # ---- queries ------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        """Landmark names in the scene's order."""
        return tuple(m.name for m in self.landmarks)

    def landmark(self, name: str) -> Landmark:
        """The landmark called `name` (any case); ValueError listing the known ones otherwise."""
        key = str(name).strip().lower()
        for mark in self.landmarks:
            if mark.name.lower() == key:
                return mark
        known = ", ".join(self.names) or "none"
        raise ValueError(f"unknown landmark {name!r} in scene {self.name!r}; known landmarks: {known}")

    def landmark_at(self, cell: Any) -> str | None:
        """The name of the landmark occupying `cell` ((x, y) or a pose with .x/.y), or None."""
        mark = self._by_cell.get(_as_xy(cell))
        return mark.name if mark else None

    def distance(self, cell: Any, name: str) -> int:
        """Manhattan distance from `cell` to the nearest cell of landmark `name` (0 on it)."""
        return self.landmark(name).nearest_cell(_as_xy(cell))[1]

    def relation(self, cell: Any, name: str) -> str:
        """Where `cell` is relative to landmark `name`: "at" or a compass phrase ("north of")."""
        xy = _as_xy(cell)
        (lx, ly), _ = self.landmark(name).nearest_cell(xy)
        return compass(xy[0] - lx, xy[1] - ly)

    def nearest_landmark(self, cell: Any) -> tuple[str, str] | None:
        """(name, relation) of the landmark nearest to `cell`, e.g. ("sofa", "south-west of");
        None in a scene without landmarks. Ties by name."""
        xy = _as_xy(cell)
        if not self.landmarks:
            return None
        mark = min(self.landmarks, key=lambda m: (m.nearest_cell(xy)[1], m.name.lower()))
        (lx, ly), _ = mark.nearest_cell(xy)
        return mark.name, compass(xy[0] - lx, xy[1] - ly)

    # ---- JSON ---------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        """JSON form; `walls` only when there are some (a wall-less scene's dict is as it always was)."""
        x, y, o = self.start
        out = {"name": self.name, "size": self.size, "goal": list(self.goal),
               "start": {"x": x, "y": y, "orientation": o}, "landmarks": [m.as_dict() for m in self.landmarks]}
        if self.walls:
            out["walls"] = [list(c) for c in self.walls]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Scene":
        if not isinstance(data, Mapping):
            raise ValueError(f"a scene must be a mapping (name, size, goal, start, landmarks), got {data!r}")
        unknown = set(data) - {"name", "size", "goal", "start", "landmarks", "walls"}
        if unknown:
            raise ValueError(f"scene {data.get('name', '?')!r} has unknown fields {sorted(unknown)}")
        if "name" not in data:
            raise ValueError("a scene needs a name")
        base = cls(str(data["name"]))
        landmarks = data.get("landmarks", ())
        if isinstance(landmarks, (str, bytes, Mapping)) or not isinstance(landmarks, Iterable):
            raise ValueError(f"scene {data['name']!r}: landmarks must be a list, got {landmarks!r}")
        walls = data.get("walls", ())
        if isinstance(walls, (str, bytes, Mapping)) or not isinstance(walls, Iterable):
            raise ValueError(f"scene {data['name']!r}: walls must be a list of [x, y] cells, got {walls!r}")
        return cls(data["name"], data.get("size", base.size), data.get("goal", base.goal),
                   data.get("start", base.start), tuple(landmarks), tuple(walls))


def _reachable(goal: Cell, walls: set[Cell], size: int) -> set[Cell]:
    """Open cells joined to `goal` by steps between open neighbours (turns are always free,
    so cell connectivity is pose connectivity)."""
    seen, todo = {goal}, [goal]
    while todo:
        x, y = todo.pop()
        for n in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= n[0] < size and 0 <= n[1] < size and n not in walls and n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def walls_from_rows(rows: Sequence[str]) -> tuple[Cell, ...]:
    """Wall cells from a picture, north row first: '#' a wall, anything else open."""
    top = len(rows) - 1
    return tuple((x, top - r) for r, row in enumerate(rows) for x, ch in enumerate(row) if ch == "#")


def _as_xy(cell: Any) -> Cell:
    if hasattr(cell, "x") and hasattr(cell, "y"):
        return int(cell.x), int(cell.y)
    return _cell(cell, "cell")


EMPTY = Scene("empty")
FLAT = Scene(
    "flat",
    size=8,
    goal=(7, 7),
    start=(0, 0, "east"),
    landmarks=(
        Landmark("fridge", ((0, 6), (0, 7)), "#29b6f6"),
        Landmark("bathtub", ((7, 0), (7, 1), (7, 2)), "#ab47bc", letter="T"),  # B is the bed's
        Landmark("sofa", ((2, 3), (3, 3), (4, 3)), "#ff7043"),
        Landmark("bed", ((4, 5), (5, 5), (4, 6), (5, 6)), "#ffca28"),
    ),
)
# Four rooms (after Sutton, Precup & Singh's), on 8x8: a wall column at x=3 and a wall row
# at y=4, each with two doorways; start in the south-west room, goal in the north-east.
ROOMS = Scene(
    "rooms",
    size=8,
    goal=(7, 7),
    start=(0, 0, "east"),
    walls=walls_from_rows([
        "...#....",  # y=7
        "........",  # y=6: the north doorway (3, 6)
        "...#....",
        "#.###.##",  # y=4: doorways (1, 4) and (5, 4)
        "...#....",
        "...#....",
        "........",  # y=1: the south doorway (3, 1)
        "...#....",  # y=0
    ]),
)
# A 6x6 maze: corridors with a dead end, two routes of different length to the goal.
MAZE = Scene(
    "maze",
    size=6,
    goal=(5, 5),
    start=(0, 0, "north"),
    walls=walls_from_rows([
        "...#..",  # y=5
        ".#.#.#",
        ".#....",
        ".####.",
        "....#.",
        ".##...",  # y=0
    ]),
)
SCENES: dict[str, Scene] = {s.name: s for s in (EMPTY, FLAT, ROOMS, MAZE)}
DEFAULT_SCENE = "empty"


def load_scene_file(path: str | Path) -> Scene:
    """A scene from a JSON file (its `as_dict()` form); a one-line ValueError naming the
    file and what is wrong (missing, not JSON, a bad field)."""
    import json

    p = Path(path).expanduser()
    if p.is_dir():
        raise ValueError(f"{p} is a folder; give a scene's JSON file (lactchain env show --scene NAME --json "
                         "prints one)")
    if not p.is_file():
        raise ValueError(f"scene file {p} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"scene file {p} is not text JSON") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"scene file {p} is not JSON (line {exc.lineno}: {exc.msg})") from None
    if isinstance(data, dict) and isinstance(data.get("scene"), dict):
        data = data["scene"]  # `lactchain env show --scene NAME --json` as printed: its scene part
    try:
        return Scene.from_dict(data)
    except ValueError as exc:
        raise ValueError(f"scene file {p}: {exc}") from None


def is_scene_file(scene: Any) -> bool:
    """A --scene value naming a file rather than a bundled scene."""
    return isinstance(scene, (str, Path)) and (str(scene).lower().endswith(".json") or "/" in str(scene))


def get_scene(scene: str | Scene | Mapping[str, Any] | None) -> Scene:
    """A bundled scene by name (any case), a JSON file of one (a path ending in .json), a
    Scene as is, or one from its `as_dict()` form."""
    if scene is None:
        return SCENES[DEFAULT_SCENE]
    if isinstance(scene, Scene):
        return scene
    if isinstance(scene, Mapping):
        return Scene.from_dict(scene)
    if is_scene_file(scene):
        return load_scene_file(scene)
    key = str(scene).strip().lower()
    if key not in SCENES:
        raise ValueError(f"unknown scene {scene!r}; known scenes: {', '.join(SCENES)}, or a scene JSON file")
    return SCENES[key]
