"""Captioned Taxi: gymnasium's Taxi (Dietterich's taxi domain, `TaxiEnv`) as a text env.

A LactChain action is a list of moves from `south`, `north`, `east`, `west`, `pickup`,
`dropoff`, executed in order by gymnasium's own env (its transition table `P`: the
dynamics are not re-implemented here) until the passenger is delivered; moves after
that are ignored, and at most `max_moves_per_action` are read. The action's reward is
the sum of gymnasium's rewards: -1 a move, -10 an illegal pickup or drop-off, +20 the
delivery. Every move is captioned ("drove north twice, hit a wall going east, picked up
the passenger at Red"), so an LLM judge can compare two episodes from their captions.

The city is 5x5, row 0 the northern edge, column 0 the western edge; the four stops are
Red (row 0, column 0), Green (0, 4), Yellow (4, 0) and Blue (4, 3). A state is the taxi's
cell, where the passenger is (a stop, or in the taxi) and their destination (a stop).
Episodes start where gymnasium's do (uniform over its 300 initial states: the passenger
waits at a stop that is not their destination); a seeded reset draws one, so `--start
fixed` plays seeded starts. The exact optimum (`TaxiSolver`) is value iteration over
gymnasium's transition table, at the level of moves (the shortest delivery and its
return) and of whole move lists (V* under a per-action discount).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.toy_text.taxi import MAP, TaxiEnv

from lactchain.moves import format_moves, action_moves, validate_moves

SOUTH, NORTH, EAST, WEST, PICKUP, DROPOFF = "south", "north", "east", "west", "pickup", "dropoff"
TAXI_MOVES: tuple[str, ...] = (SOUTH, NORTH, EAST, WEST, PICKUP, DROPOFF)  # gymnasium's action order 0..5
STOPS: tuple[str, ...] = ("red", "green", "yellow", "blue")  # gymnasium's location order 0..3
IN_TAXI = "taxi"  # the passenger's location while riding (gymnasium's index 4)
PASSENGER_PLACES: tuple[str, ...] = (*STOPS, IN_TAXI)
SIZE = 5
DELIVERY_REWARD = 20.0
OBSERVATION_LABEL = "Taxi"
_GAME = TaxiEnv()  # the stops' cells and the map's walls (read once)
STOP_CELLS: dict[str, tuple[int, int]] = dict(zip(STOPS, (tuple(c) for c in _GAME.locs)))


def _walls_sentence() -> str:
    """The map's east-west walls in words (read off gymnasium's MAP)."""
    walls: dict[int, list[int]] = {}
    for row in range(SIZE):
        for col in range(SIZE - 1):
            if MAP[1 + row][2 * col + 2] == "|":
                walls.setdefault(col, []).append(row)
    parts = [f"between columns {c} and {c + 1} in rows {' and '.join(map(str, rows))}" for c, rows in sorted(walls.items())]
    return "Walls block moving east or west " + ", ".join(parts[:-1]) + f" and {parts[-1]}."


DEFAULT_STRATEGY = (
    "You drive a taxi in a 5x5 city: row 0 is the north edge, column 0 the west edge. Drive to the passenger, "
    "pick them up, drive to their destination and drop them off, in as few moves as possible. "
    + _walls_sentence()
)


def _stop(name: str) -> str:
    return name.capitalize()


def _steps(n: int) -> str:
    return f"{n} step{'s' if n != 1 else ''}"


def _direction(frm: tuple[int, int], to: tuple[int, int]) -> str:
    """'2 steps north and 1 step east' (rows grow south, columns east)."""
    dr, dc = to[0] - frm[0], to[1] - frm[1]
    parts = []
    if dr:
        parts.append(f"{_steps(abs(dr))} {'south' if dr > 0 else 'north'}")
    if dc:
        parts.append(f"{_steps(abs(dc))} {'east' if dc > 0 else 'west'}")
    return " and ".join(parts)


@dataclass(frozen=True)
class TaxiState:
    """The taxi's cell, where the passenger is (a stop or "taxi") and their destination."""

    taxi_row: int
    taxi_col: int
    passenger: str
    destination: str

    def as_dict(self) -> dict[str, Any]:
        return {"taxi_row": self.taxi_row, "taxi_col": self.taxi_col, "passenger": self.passenger,
                "destination": self.destination}

    @property
    def cell(self) -> tuple[int, int]:
        return self.taxi_row, self.taxi_col

    @property
    def delivered(self) -> bool:
        return self.passenger == self.destination

    def index(self) -> int:
        """gymnasium's state number."""
        return int(_GAME.encode(self.taxi_row, self.taxi_col, PASSENGER_PLACES.index(self.passenger),
                                STOPS.index(self.destination)))

    @classmethod
    @functools.lru_cache(maxsize=None)  # 500 immutable states, each decoded once: the env reads its state often
    def from_index(cls, s: int) -> "TaxiState":
        row, col, p, d = _GAME.decode(int(s))
        return cls(int(row), int(col), PASSENGER_PLACES[p], STOPS[d])

    def short(self) -> str:
        """The state in a table cell: '(2,3) R>G' (passenger at Red, to Green), '(2,3) T>G' (riding)."""
        return f"({self.taxi_row},{self.taxi_col}) {self.passenger[0].upper()}>{self.destination[0].upper()}"

    def __str__(self) -> str:
        where = "in the taxi" if self.passenger == IN_TAXI else f"at {_stop(self.passenger)}"
        return f"taxi at (row {self.taxi_row}, column {self.taxi_col}), passenger {where}, to {_stop(self.destination)}"

    def describe(self) -> str:
        """The state as the actor reads it: the taxi's cell, where the passenger is and where
        they go, each target's direction from the taxi in steps."""
        return _description(self)

    def _describe(self) -> str:
        head = f"The taxi is at row {self.taxi_row}, column {self.taxi_col}."
        dest = _stop(self.destination)
        dest_cell = STOP_CELLS[self.destination]
        if self.delivered:
            return f"{head} The passenger was dropped off at {dest}, their destination."
        if self.passenger == IN_TAXI:
            way = _direction(self.cell, dest_cell)
            where = f", {way} of the taxi" if way else ", where the taxi is"
            return f"{head} The passenger is in the taxi and wants to go to {dest}{where}."
        pick = _stop(self.passenger)
        way = _direction(self.cell, STOP_CELLS[self.passenger])
        where = f", {way} of the taxi," if way else ", where the taxi is,"
        return f"{head} The passenger waits at {pick}{where} and wants to go to {dest}."


@functools.lru_cache(maxsize=None)  # 500 states; every reset and step of a replayed action describes one
def _description(state: TaxiState) -> str:
    return state._describe()


def start_states() -> list[TaxiState]:
    """gymnasium's 300 initial states, in its state order: every taxi cell x a passenger
    waiting at a stop x a destination that is another stop."""
    return [TaxiState(r, c, p, d) for r in range(SIZE) for c in range(SIZE) for p in STOPS for d in STOPS if p != d]


def parse_taxi_state(value: Any) -> TaxiState:
    """A TaxiState from a TaxiState, a dict or a (row, col, passenger, destination) tuple;
    places by name (case-insensitive) or gymnasium's index (ValueError names the field)."""
    if isinstance(value, TaxiState):
        return value
    if isinstance(value, Mapping):
        missing = {"taxi_row", "taxi_col", "passenger", "destination"} - set(value)
        if missing:
            raise ValueError(f"taxi state {dict(value)!r} is missing {sorted(missing)}")
        raw = (value["taxi_row"], value["taxi_col"], value["passenger"], value["destination"])
    else:
        try:
            raw = tuple(value)
            if len(raw) != 4:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"a taxi state is {{taxi_row, taxi_col, passenger, destination}}, got {value!r}") from None
    row, col, passenger, destination = raw
    cells = []
    for name, v in (("taxi_row", row), ("taxi_col", col)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, float, np.floating)) or int(v) != v \
                or not 0 <= int(v) < SIZE:
            raise ValueError(f"{name} must be a whole number 0..{SIZE - 1}, got {v!r}")
        cells.append(int(v))
    return TaxiState(cells[0], cells[1], _place(passenger, PASSENGER_PLACES, "passenger"),
                     _place(destination, STOPS, "destination"))


def _place(value: Any, names: tuple[str, ...], field: str) -> str:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= int(value) < len(names):
        return names[int(value)]
    text = str(value).strip().lower()
    if text in ("in taxi", "in the taxi") and IN_TAXI in names:
        return IN_TAXI
    if text not in names:
        raise ValueError(f"{field} {value!r} is not one of {', '.join(names)}")
    return text


def _count(n: int) -> str:
    return {1: "", 2: " twice"}.get(n, f" {n} times")


class TaxiTextEnv(gym.Env):
    """Gymnasium env: observation {taxi_row, taxi_col, passenger (0-4, 4 = in the taxi),
    destination (0-3)}; action = a list of moves (`["north", "pickup"]` or indices into
    `self.moves`)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    observation_label = OBSERVATION_LABEL
    default_strategy = DEFAULT_STRATEGY
    strategy_hints = ("Drive to the passenger first, then pick them up.",
                      "After the pickup, drive to the destination and drop them off.",
                      "Walls block some moves: go around them.", "Give all the moves to the next stop in one answer.")

    # ---- the text-env seam (lactchain.envs.catalog.TextEnv) ---------------------
    name = "taxi"  # its key in lactchain.envs.catalog.ENVS
    stochastic = False  # gymnasium's dry taxi: a move list from a state always ends the same way
    fixed_start = None  # a 'fixed' start is the one the seed draws from gymnasium's initial distribution
    all_moves = TAXI_MOVES
    judge_description = ("a taxi in a 5x5 city with four stops (Red, Green, Yellow, Blue): the driver goes to the "
                         "passenger, picks them up, drives to their destination and drops them off. Each move costs "
                         "1, a wrong pickup or drop-off costs 10, the delivery earns 20.")
    judge_goal = "deliver the passenger in as few moves as possible, without wrong pickups or drop-offs"
    outcome_words = ("delivered the passenger", "did not deliver the passenger")
    has_scenes = False
    classic_kwargs = {"max_moves_per_action": 1, "max_actions": 200}  # gymnasium's time limit: 200 moves
    transfer = None
    console_view = "text"
    lab_blurb = "The Lab plays Taxi (gymnasium's): seeded starts, value iteration as the oracle"

    def __init__(self, max_actions: int = 20, max_moves_per_action: int = 8, moves: Iterable[str] = TAXI_MOVES,
                 render_mode: str | None = None):
        moves = tuple(validate_moves(moves, TAXI_MOVES))
        if sorted(moves) != sorted(TAXI_MOVES) or len(set(moves)) != len(moves):
            raise ValueError(f"taxi's moves are {', '.join(TAXI_MOVES)}, got {list(moves)}")
        if int(max_actions) < 1 or int(max_moves_per_action) < 1:
            raise ValueError("max_actions and max_moves_per_action must be >= 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.moves = moves
        self.max_actions = int(max_actions)
        self.max_moves_per_action = int(max_moves_per_action)
        self.render_mode = render_mode
        self.game = TaxiEnv()  # gymnasium's dynamics (its table P), stepped move by move
        self.observation_space = spaces.Dict({
            "taxi_row": spaces.Discrete(SIZE), "taxi_col": spaces.Discrete(SIZE),
            "passenger": spaces.Discrete(len(PASSENGER_PLACES)), "destination": spaces.Discrete(len(STOPS)),
        })
        self.action_space = spaces.Sequence(spaces.Discrete(len(self.moves)))
        self.actions_taken = 0
        self.start = start_states()[0]
        self.game.s = self.start.index()
        self.path: list[TaxiState] = [self.start]

    @property
    def state(self) -> TaxiState:
        return TaxiState.from_index(self.game.s)

    def describe(self, state: TaxiState | None = None) -> str:
        return (state or self.state).describe()

    def critic_text(self, state: TaxiState) -> str:
        s = parse_taxi_state(state)
        return f"taxi row {s.taxi_row} col {s.taxi_col}; passenger {s.passenger}; destination {s.destination}"

    def start_states(self) -> list[TaxiState]:
        return start_states()

    def parse_state(self, value: Any) -> TaxiState:
        return parse_taxi_state(value)

    def is_terminal(self, state: TaxiState) -> bool:
        return parse_taxi_state(state).delivered

    def solver(self) -> "TaxiSolver":
        return TaxiSolver(self.max_moves_per_action)

    def state_features(self, state: TaxiState) -> np.ndarray:
        """14 numbers for the classic agents: the taxi's row and column (/4), the passenger's
        place one-hot (4 stops, in the taxi), the destination one-hot, the current target
        (the passenger, once riding the destination) in rows and columns from the taxi (/4),
        and 1 when the taxi is on it."""
        s = parse_taxi_state(state)
        target = STOP_CELLS[s.destination if s.passenger == IN_TAXI else s.passenger]
        dr, dc = target[0] - s.taxi_row, target[1] - s.taxi_col
        return np.array([s.taxi_row / 4, s.taxi_col / 4, *[float(s.passenger == p) for p in PASSENGER_PLACES],
                         *[float(s.destination == d) for d in STOPS], dr / 4, dc / 4, float(not dr and not dc)],
                        dtype=np.float32)

    def vocabulary_texts(self) -> list[str]:
        """Taxi's prompt, moves, every state's description and the captions' words."""
        from lactchain.prompts import render_prompt

        texts = [render_prompt(DEFAULT_STRATEGY, "", TAXI_MOVES, observation_label=OBSERVATION_LABEL),
                 format_moves(list(TAXI_MOVES)), self.judge_description, self.judge_goal, *self.outcome_words,
                 " ".join(m.capitalize() for m in TAXI_MOVES) + " " + " ".join(_stop(p) for p in PASSENGER_PLACES)]
        every = [TaxiState.from_index(s) for s in range(SIZE * SIZE * len(PASSENGER_PLACES) * len(STOPS))]
        texts.extend(s.describe() for s in every)
        texts.extend(str(s) for s in every[:: 7])
        env = TaxiTextEnv(max_actions=1, max_moves_per_action=3)
        for s in every:  # every kind of event: drives, walls, pickups, drop-offs, repeats, the limits
            if s.delivered:
                continue
            for move in TAXI_MOVES:
                env.reset(options={"state": s})
                texts.append(env.step([move] * 4)[4]["caption"])
        env.reset(options={"state": every[-1]})
        texts.append(env.step([])[4]["caption"])
        texts.append(env.render_text())
        return texts

    def render_text(self) -> str:
        """The map with the taxi ('T', '@' carrying the passenger), and a legend line."""
        s = self.state
        rows = [list(line) for line in MAP]
        rows[1 + s.taxi_row][2 * s.taxi_col + 1] = "@" if s.passenger == IN_TAXI else "T"
        where = "in the taxi" if s.passenger == IN_TAXI else f"at {_stop(s.passenger)}"
        lines = ["".join(r) for r in rows]
        lines.append(f"T taxi · @ taxi with the passenger · passenger {where} · destination {_stop(s.destination)}")
        return "\n".join(lines)

    def headline(self, state: TaxiState) -> str:
        return parse_taxi_state(state).describe()

    @classmethod
    def plan_from_prompt(cls, prompt: str) -> list[str] | None:
        """The exact solver's move list for the state a prompt describes; None when the
        prompt is not Taxi's."""
        state = _state_from_text(prompt)
        if state is None:
            return None
        return [] if state.delivered else _oracle_solver().plan(state)

    # ---- gymnasium API ----------------------------------------------------------
    def _obs(self) -> dict[str, int]:
        s = self.state
        return {"taxi_row": s.taxi_row, "taxi_col": s.taxi_col, "passenger": PASSENGER_PLACES.index(s.passenger),
                "destination": STOPS.index(s.destination)}

    def _info(self, caption: str, **extra: Any) -> dict[str, Any]:
        return {"state": self.state.as_dict(), "description": self.describe(), "caption": caption,
                "actions_taken": self.actions_taken, **extra}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        given = options.get("state")
        if given is None or seed is not None:  # the draw (and gymnasium's seeding) a given state does not need
            self.game.reset(seed=seed)  # gymnasium's own draw from its initial distribution
        if given is not None:
            self.game.s = parse_taxi_state(given).index()
        self.actions_taken = 0
        self.path = [self.state]
        s = self.state
        caption = f"start: {s}" + (" (already delivered)" if s.delivered else "")
        return self._obs(), self._info(caption)

    def _to_moves(self, action: Iterable[Any]) -> list[str]:
        return action_moves(action, self.moves)

    def _event(self, before: TaxiState, move: str, after: TaxiState, reward: float) -> str:
        if move in (SOUTH, NORTH, EAST, WEST):
            return f"drove {move}" if after.cell != before.cell else f"hit a wall going {move}"
        if move == PICKUP:
            if reward < -1:
                why = "the passenger is already in the taxi" if before.passenger == IN_TAXI else "no passenger here"
                return f"pickup failed: {why} (-10)"
            return f"picked up the passenger at {_stop(before.passenger)}"
        if after.delivered:
            return f"dropped off the passenger at {_stop(after.destination)}: delivered (+20)"
        if reward < -1:
            why = "no passenger in the taxi" if before.passenger != IN_TAXI else "not at a stop"
            return f"drop-off failed: {why} (-10)"
        return f"dropped off the passenger at {_stop(after.passenger)}, not their destination"

    def _play(self, move: int) -> tuple[float, bool]:
        """One move of gymnasium's dynamics, read off its table P: the Taxi-v3 made here (not
        rainy, no fickle passenger) has one outcome per state and move, so TaxiEnv.step's
        draw among outcomes, its decodes and its action mask (~15 us a move, most of a
        replayed action's cost in search and scoring) are skipped."""
        (_, s, r, terminated), = self.game.P[self.game.s][move]
        self.game.s, self.game.lastaction = s, move
        return float(r), bool(terminated)

    def step(self, action: Iterable[Any]):
        moves = self._to_moves(action)
        limit = self.max_moves_per_action
        self.actions_taken += 1
        events: list[str] = []
        reward, executed, terminated = 0.0, 0, False
        if self.state.delivered:
            moves, terminated = [], True
            events.append("the passenger was already delivered")
        before = self.state
        for move in moves[:limit]:
            r, terminated = self._play(TAXI_MOVES.index(move))
            after = self.state
            executed += 1
            reward += r
            self.path.append(after)
            events.append(self._event(before, move, after, r))
            before = after
            if terminated:
                break
        ignored = len(moves) - executed
        truncated = not terminated and self.actions_taken >= self.max_actions
        caption = _collapse(events) or "did nothing (empty move list)"
        if ignored:
            caption += f"; {ignored} move{'s' if ignored > 1 else ''} after the delivery ignored" if terminated \
                else f"; {ignored} extra move{'s' if ignored > 1 else ''} ignored (limit {limit})"
        if truncated:
            caption += f"; out of actions ({self.max_actions})"
        delivered = self.state.delivered
        info = self._info(caption, moves=moves[:executed], moves_executed=executed, moves_dropped=ignored,
                          success=delivered, delivered=delivered)
        return self._obs(), reward, bool(terminated), truncated, info

    def render(self):
        if self.render_mode == "ansi":
            return self.render_text()
        return None


def _collapse(events: list[str]) -> str:
    """Runs of the same event as one: "drove north twice, hit a wall going east"."""
    parts, i = [], 0
    while i < len(events):
        j = i
        while j < len(events) and events[j] == events[i]:
            j += 1
        text, n = events[i], j - i
        if n > 1 and text.endswith(" (-10)"):  # "pickup failed: no passenger here twice (-10 each)"
            text = text.removesuffix(" (-10)") + _count(n) + " (-10 each)"
        else:
            text += _count(n)
        parts.append(text)
        i = j
    return ", ".join(parts)


_TAXI_RE = re.compile(r"The taxi is at row (\d), column (\d)\.")
_WAITS_RE = re.compile(r"The passenger waits at (\w+)\b.*? and wants to go to (\w+)\.")
_RIDES_RE = re.compile(r"The passenger is in the taxi and wants to go to (\w+)\b")
_DONE_RE = re.compile(r"The passenger was dropped off at (\w+), their destination\.")


def _state_from_text(text: str) -> TaxiState | None:
    """The state a `TaxiState.describe` text says (inside any prompt); None when it says none."""
    taxi = _TAXI_RE.search(text)
    if taxi is None:
        return None
    cell = int(taxi.group(1)), int(taxi.group(2))
    try:
        if (m := _WAITS_RE.search(text)) is not None:
            return parse_taxi_state((*cell, m.group(1), m.group(2)))
        if (m := _RIDES_RE.search(text)) is not None:
            return parse_taxi_state((*cell, IN_TAXI, m.group(1)))
        if (m := _DONE_RE.search(text)) is not None:
            return parse_taxi_state((*cell, m.group(1), m.group(1)))
    except ValueError:
        return None
    return None


_ORACLE: list["TaxiSolver"] = []


def _oracle_solver() -> "TaxiSolver":
    if not _ORACLE:
        _ORACLE.append(TaxiSolver())
    return _ORACLE[0]


# ---- exact ground truth: value iteration over gymnasium's transition table P -------------
_TABLE: dict[str, np.ndarray] = {}
_MEMO: dict[tuple, np.ndarray] = {}


def transition_table() -> dict[str, np.ndarray]:
    """gymnasium's P as arrays over (state, action): next state, reward, terminated
    (the dry taxi has one outcome per pair, probability 1; checked)."""
    if not _TABLE:
        P = _GAME.P
        n, m = len(P), len(TAXI_MOVES)
        nxt, rew, done = np.zeros((n, m), dtype=np.int64), np.zeros((n, m)), np.zeros((n, m), dtype=bool)
        for s in range(n):
            for a in range(m):
                (p, s2, r, t), = P[s][a]
                assert p == 1.0, "gymnasium's dry taxi is deterministic"
                nxt[s, a], rew[s, a], done[s, a] = s2, r, t
        _TABLE.update(next=nxt, reward=rew, done=done)
    return _TABLE


class TaxiSolver:
    """The exact optimum of the text env, by value iteration over gymnasium's table P.

    - per move, undiscounted (`move_values`): U*(s), the best return of the rest of the
      episode (the shortest delivery: 21 - its moves), with `plan` (a shortest delivery:
      greedy on U*) and `distance` (its length), what the optimal ratio is measured with;
    - per action (`values`, `value`): V*(s) over whole move lists of at most
      `max_moves_per_action` moves, the discount applied per action, as the critic and the
      labelers see the env.
    """

    def __init__(self, max_moves_per_action: int = 8) -> None:
        self.max_moves = int(max_moves_per_action)
        self.table = transition_table()
        self.states = [TaxiState.from_index(s) for s in range(len(self.table["next"]))]
        self.terminal = np.array([s.delivered for s in self.states])

    def move_values(self) -> np.ndarray:
        """U*(s) for gymnasium's 500 state numbers (0 at a delivered state): value iteration
        with gamma 1 (every loop costs, so it converges to the best episode return)."""
        key = ("moves",)
        if key not in _MEMO:
            nxt, rew, done = self.table["next"], self.table["reward"], self.table["done"]
            u = np.zeros(len(nxt))
            for _ in range(10_000):
                new = (rew + np.where(done, 0.0, u[nxt])).max(axis=1)
                new[self.terminal] = 0.0
                if np.array_equal(new, u):
                    break
                u = new
            _MEMO[key] = u
        return _MEMO[key]

    def optimal_return(self, state: TaxiState) -> float:
        """The best undiscounted return from `state` (what executing `plan` earns)."""
        return float(self.move_values()[parse_taxi_state(state).index()])

    def plan(self, state: TaxiState) -> list[str]:
        """One optimal move list from `state` to the delivery (empty once delivered)."""
        u = self.move_values()
        nxt, rew, done = self.table["next"], self.table["reward"], self.table["done"]
        s, out = parse_taxi_state(state).index(), []
        while not self.terminal[s]:
            q = rew[s] + np.where(done[s], 0.0, u[nxt[s]])
            a = int(np.argmax(q))  # ties: gymnasium's action order
            out.append(TAXI_MOVES[a])
            if done[s, a]:
                break
            s = int(nxt[s, a])
            if len(out) > 200:
                raise RuntimeError("no delivery within 200 moves")  # never: every state can deliver
        return out

    def distance(self, state: TaxiState) -> int:
        """Fewest moves from `state` to the delivery."""
        return len(self.plan(state))

    def _action_values(self, gamma: float, tol: float = 1e-9) -> np.ndarray:
        """V*(s) over whole actions: W_k(s) = max(gamma V(s), max_a r(s,a) + [not done] W_{k-1}(s')),
        the best of stopping the list now or playing one more of k moves left; V = W_K."""
        key = ("actions", self.max_moves, float(gamma), float(tol))
        if key not in _MEMO:
            nxt, rew, done = self.table["next"], self.table["reward"], self.table["done"]
            v = np.zeros(len(nxt))
            for _ in range(10_000):
                w = gamma * v
                for _ in range(self.max_moves):
                    w = np.maximum(gamma * v, (rew + np.where(done, 0.0, w[nxt])).max(axis=1))
                w[self.terminal] = 0.0
                delta = float(np.abs(w - v).max())
                v = w
                if delta < tol:
                    break
            _MEMO[key] = v
        return _MEMO[key]

    def values(self, gamma: float = 0.99) -> dict[TaxiState, float]:
        """V*(s) of every non-terminal state (400) under per-action discount `gamma`."""
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"gamma must be in [0, 1), got {gamma}")
        v = self._action_values(gamma)
        return {s: float(v[i]) for i, s in enumerate(self.states) if not self.terminal[i]}

    def value(self, state: TaxiState, gamma: float = 0.99) -> float:
        return float(self._action_values(gamma)[parse_taxi_state(state).index()])
