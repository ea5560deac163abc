"""Captioned Blackjack: gymnasium's Blackjack-v1 (Sutton & Barto rules) as a text env.

A LactChain action is a list of `hit`/`stick` moves, executed in order until the hand
ends (bust or stick); moves after that are ignored. A list that ends with the hand
still open (e.g. `['hit']`) leaves it open for the next action. Every event is
captioned in words ("hit and drew a 7 (sum 15)", "stuck on 18", "the dealer drew a
5: final total 20", "lost 18 to 20"), so an LLM can judge two hands from their
captions alone (Motif, arXiv 2310.00166).

The cards come from gymnasium's env (infinite deck, its seeded `np_random`), so a hand
replays exactly from its seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.toy_text.blackjack import BlackjackEnv as _GymBlackjack
from gymnasium.envs.toy_text.blackjack import is_bust, is_natural, sum_hand, usable_ace

from lactchain.moves import HIT, LIST_MAX_MOVES, STICK, action_moves, format_moves, validate_moves

BLACKJACK_MOVES: tuple[str, ...] = (HIT, STICK)
DEFAULT_STRATEGY = (
    "You are playing blackjack against the dealer. Hit to draw a card, stick to stop and let the dealer play. "
    "Get closer to 21 than the dealer without going over."
)
OBSERVATION_LABEL = "Blackjack"


# The hand as `Hand.describe` and the natural's own line put it (read back by `plan_from_prompt`).
_HAND_RE = re.compile(r"Your sum is (\d+)( with a usable ace)?; the dealer shows (an ace|an? (\d+))", re.I)
_NATURAL_RE = re.compile(r"You have a natural blackjack", re.I)
_ORACLE_SOLVER: "BlackjackSolver | None" = None


def card_name(card: int) -> str:
    return {1: "an ace", 8: "an 8"}.get(card, f"a {card}")


@dataclass(frozen=True)
class Hand:
    """What the player sees: their sum, whether an ace counts as 11, the dealer's up card.
    The Blackjack state the solver, the critic and the prompts work on (hashable)."""

    player_sum: int
    dealer_card: int
    usable_ace: bool

    def as_dict(self) -> dict[str, Any]:
        return {"player_sum": self.player_sum, "dealer_card": self.dealer_card, "usable_ace": self.usable_ace}

    def __str__(self) -> str:
        ace = " (usable ace)" if self.usable_ace else ""
        return f"sum {self.player_sum}{ace} vs dealer {self.dealer_card}"

    def short(self) -> str:
        """The hand in a table cell: '15 v 10', 'soft 17 v A' (a usable ace)."""
        dealer = "A" if self.dealer_card == 1 else str(self.dealer_card)
        return f"{'soft ' if self.usable_ace else ''}{self.player_sum} v {dealer}"

    def describe(self) -> str:
        ace = " with a usable ace" if self.usable_ace else ""
        up = "an ace" if self.dealer_card == 1 else f"a {self.dealer_card}"
        return f"Your sum is {self.player_sum}{ace}; the dealer shows {up}."


def start_hands() -> list[Hand]:
    """Every hand a deal can produce: hard 4..20 (two non-aces) and soft 12..21 (an ace
    and one more card), against each up card 1..10: 270 start states."""
    sums = [(s, False) for s in range(4, 21)] + [(s, True) for s in range(12, 22)]
    return [Hand(s, d, a) for s, a in sums for d in range(1, 11)]


def hand_cards(hand: Hand) -> list[int]:
    """Two cards that deal `hand` (used to set a start state: soft s = ace + (s-11))."""
    if hand.usable_ace:
        return [1, hand.player_sum - 11]
    first = min(10, hand.player_sum - 2)
    return [first, hand.player_sum - first]


def parse_hand(value: Any) -> Hand:
    """A Hand from a Hand, a dict or a (sum, dealer, ace) triple, checked to be a hand a
    deal can produce (ValueError names the field)."""
    if isinstance(value, Hand):
        return value
    if isinstance(value, Mapping):
        missing = {"player_sum", "dealer_card", "usable_ace"} - set(value)
        if missing:
            raise ValueError(f"hand {dict(value)!r} is missing {sorted(missing)}")
        raw = (value["player_sum"], value["dealer_card"], value["usable_ace"])
    else:
        try:
            raw = tuple(value)
            if len(raw) != 3:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"a hand is {{player_sum, dealer_card, usable_ace}}, got {value!r}") from None
    s, d, a = raw
    try:
        s, d = int(s), int(d)
    except (TypeError, ValueError):
        raise ValueError(f"player_sum and dealer_card must be whole numbers, got {raw!r}") from None
    hand = Hand(s, d, bool(a))
    if not 1 <= d <= 10:
        raise ValueError(f"dealer_card must be 1 (ace) to 10, got {d}")
    if not (12 <= s <= 21 if hand.usable_ace else 4 <= s <= 21):
        span = "12..21 with a usable ace" if hand.usable_ace else "4..21"
        raise ValueError(f"player_sum {s} is not a hand sum ({span})")
    return hand


class BlackjackTextEnv(gym.Env):
    """Gymnasium env: observation {player_sum, dealer_card, usable_ace}; action = a list
    of moves (`["hit", "stick"]` or indices into `self.moves`); reward +1 win, -1 loss,
    0 draw (a natural wins unless the dealer has one too)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    observation_label = OBSERVATION_LABEL
    default_strategy = DEFAULT_STRATEGY
    strategy_hints = ("Stick when your sum is 17 or more.", "Hit when your sum is 11 or less.",
                      "Stick on 13 to 16 when the dealer shows 2 to 6.",
                      "Hit on 12 to 16 when the dealer shows 7 or more, or an ace.",
                      "With a usable ace, hit on 17 or less.", "Answer with one move at a time.")

    def __init__(self, max_actions: int = 10, max_moves_per_action: int = 8,
                 moves: Iterable[str] = BLACKJACK_MOVES, render_mode: str | None = None):
        moves = tuple(validate_moves(moves, BLACKJACK_MOVES))
        if sorted(moves) != sorted(BLACKJACK_MOVES):
            raise ValueError(f"blackjack's moves are {', '.join(BLACKJACK_MOVES)}, got {list(moves)}")
        if max_actions < 1 or max_moves_per_action < 1:
            raise ValueError("max_actions and max_moves_per_action must be >= 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.moves = moves
        self.max_actions = int(max_actions)
        self.max_moves_per_action = int(max_moves_per_action)
        self.render_mode = render_mode
        self.game = _GymBlackjack(sab=True)
        self._deck: random.Random | None = None
        self.observation_space = spaces.Dict({
            "player_sum": spaces.Discrete(32), "dealer_card": spaces.Discrete(11), "usable_ace": spaces.Discrete(2),
        })
        self.action_space = spaces.Sequence(spaces.Discrete(len(self.moves)))
        self.start = Hand(15, 10, False)  # only a default for the console: every deal is its own start
        self.actions_taken = 0
        self.finished = False
        self._hand = self.start
        self.path: list[Hand] = []

    # ---- the text-env seam ------------------------------------------------------
    @property
    def state(self) -> Hand:
        return self._hand

    def _update_hand(self) -> None:
        player = self.game.player
        self._hand = Hand(sum_hand(player), self.game.dealer[0], usable_ace(player))

    def describe(self, state: Hand | None = None) -> str:
        if state is None and len(self.game.player) == 2 and is_natural(self.game.player):
            return "You have a natural blackjack (an ace and a 10); the dealer shows " \
                   f"{card_name(self.game.dealer[0])}."
        return (state or self.state).describe()

    fixed_start = None  # a 'fixed' start is the hand the seed deals
    evaluation_deals = 1000  # evaluation plays this many seeded deals (the real distribution), not the 270 hands
    name = "blackjack"  # its key in lactchain.envs.catalog.ENVS
    stochastic = True  # the same move list from the same hand meets different cards
    judge_description = (
        "Blackjack against a dealer. You see your sum, whether you hold an ace that counts as 11, and one "
        "of the dealer's cards. Hit draws a card; going over 21 is a bust and loses. Stick ends your turn: "
        "the dealer draws until reaching 17 or more, and the higher total without going over wins.")
    judge_goal = "win the hand"
    outcome_words = ("won the hand", "did not win")
    has_scenes = False
    classic_kwargs: dict[str, Any] = {}  # a move per action is already how a hand is played
    transfer = None
    console_view = "cards"  # the console's BlackjackView (the hands as cards, the hole card face down)
    lab_blurb = "The Lab plays Blackjack: seeded deals, the exact solver as the oracle (no critic)"

    def state_features(self, state: Hand) -> np.ndarray:
        """3 numbers for the classic agents: player_sum/21, dealer_card/10, usable_ace."""
        return np.array([state.player_sum / 21, state.dealer_card / 10, float(state.usable_ace)], dtype=np.float32)

    def vocabulary_texts(self) -> list[str]:
        """Blackjack's prompt, move list, hand descriptions and caption words (the tiny
        tokenizer's): a fresh env's captions of 40 seeded deals cover every kind of event."""
        from lactchain.prompts import render_prompt

        env = BlackjackTextEnv()
        texts = [render_prompt(DEFAULT_STRATEGY, "", BLACKJACK_MOVES, observation_label=OBSERVATION_LABEL),
                 format_moves(list(BLACKJACK_MOVES))]
        texts.extend(h.describe() for h in start_hands())
        for seed in range(40):  # hits, busts, sticks, dealer totals, results
            env.reset(seed=seed)
            _, _, _, _, info = env.step(["hit", "stick"] if seed % 2 else ["stick"])
            texts.append(info["caption"])
        env.reset(seed=0)
        texts.append(env.describe() + " You have a natural blackjack (an ace and a 10)")
        return texts

    all_moves = BLACKJACK_MOVES

    @classmethod
    def plan_from_prompt(cls, prompt: str) -> list[str] | None:
        """The exact solver's move for the hand a prompt describes (a natural sticks), for
        the console's model-free oracle actor; None when the prompt is not Blackjack's."""
        if _NATURAL_RE.search(prompt):
            return [STICK]
        match = _HAND_RE.search(prompt)
        if match is None:
            return None
        global _ORACLE_SOLVER  # noqa: PLW0603 - built on first use, shared
        if _ORACLE_SOLVER is None:
            _ORACLE_SOLVER = BlackjackSolver()
        dealer = 1 if match.group(3).lower() == "an ace" else int(match.group(4))
        return [_ORACLE_SOLVER.action(Hand(int(match.group(1)), dealer, bool(match.group(2))))]

    def render_text(self) -> str:
        """Both hands as text (what `render()` gives in 'ansi' mode, any render_mode)."""
        return render_ansi(self.game.player, self.game.dealer, self.finished)

    def headline(self, state: Hand) -> str:
        """The hand in one line for the console; the live hand in the env's own words (a
        natural as dealt is named)."""
        return self.describe(None if state == self.state else state)

    def canonical_moves(self, moves: Iterable[str]) -> tuple[str, ...]:
        """The moves this env actually reads: up to the first stick, within the limit."""
        out: list[str] = []
        for move in list(moves)[: self.max_moves_per_action]:
            out.append(move)
            if move == STICK:
                break
        return tuple(out)

    def critic_text(self, state: Hand) -> str:
        hand = parse_hand(state)
        return f"sum {hand.player_sum} {'soft' if hand.usable_ace else 'hard'}; dealer {hand.dealer_card}"

    def start_states(self) -> list[Hand]:
        return start_hands()

    def parse_state(self, value: Any) -> Hand:
        return parse_hand(value)

    def is_terminal(self, state: Hand) -> bool:  # noqa: ARG002 - every observed hand can still act
        return False

    def solver(self) -> "BlackjackSolver":
        return BlackjackSolver()

    # ---- gymnasium API ----------------------------------------------------------
    def _obs(self) -> dict[str, int]:
        h = self.state
        return {"player_sum": h.player_sum, "dealer_card": h.dealer_card, "usable_ace": int(h.usable_ace)}

    def _info(self, caption: str, **extra: Any) -> dict[str, Any]:
        return {"state": self.state.as_dict(), "description": self.describe(), "caption": caption,
                "actions_taken": self.actions_taken, "player_cards": list(self.game.player),
                "dealer_cards": list(self.game.dealer) if self.finished else [self.game.dealer[0]], **extra}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None or self._deck is None:
            # The cards: Python's Mersenne Twister through gymnasium's own draw (`choice` over its
            # 13-card deck), ~20x cheaper per card than a numpy Generator; same rules, same odds.
            self._deck = random.Random(seed)
            self.game._np_random = self._deck  # noqa: SLF001 - gymnasium's game draws from it
        super().reset(seed=seed)
        self.game.reset()  # deals from the deck seeded above
        options = options or {}
        if options.get("state") is not None:
            hand = parse_hand(options["state"])
            self.game.player = hand_cards(hand)
            self.game.dealer[0] = hand.dealer_card
        self.actions_taken = 0
        self.finished = False
        self._update_hand()
        self.path = [self.state]
        cards = " and ".join(card_name(c) for c in self.game.player)
        caption = f"dealt {cards} (sum {self.state.player_sum}); the dealer shows {card_name(self.game.dealer[0])}"
        if is_natural(self.game.player):
            caption = f"dealt a natural ({cards}); the dealer shows {card_name(self.game.dealer[0])}"
        return self._obs(), self._info(caption)

    def _to_moves(self, action: Iterable[Any]) -> list[str]:
        return action_moves(action, self.moves)

    def step(self, action: Iterable[Any]):
        moves = self._to_moves(action)
        if self.finished:
            raise RuntimeError("the hand is over: call reset() first")
        limit = self.max_moves_per_action
        self.actions_taken += 1
        events: list[str] = []
        reward, executed, terminated, outcome = 0.0, 0, False, ""
        for move in moves[:limit]:
            executed += 1
            natural = len(self.game.player) == 2 and is_natural(self.game.player)
            _, r, terminated, _, _ = self.game.step(1 if move == HIT else 0)
            reward = float(r)
            self._update_hand()
            if move == HIT:
                total = sum_hand(self.game.player)
                events.append(f"hit and drew {card_name(self.game.player[-1])} (sum {total})")
                if is_bust(self.game.player):
                    events.append(f"bust with {total}")
                    outcome = "lost"
            else:
                events.append(self._stick_caption(natural, reward))
                outcome = {1.0: "won", -1.0: "lost"}.get(reward, "draw")
            if terminated:
                break
        self.finished = terminated
        self.path.append(self.state)
        ignored = len(moves) - executed
        truncated = not terminated and self.actions_taken >= self.max_actions
        caption = "; ".join(events) or "did nothing (empty move list)"
        if ignored:
            caption += f"; {ignored} move{'s' if ignored > 1 else ''} after the hand ended ignored" if terminated \
                else f"; {ignored} extra move{'s' if ignored > 1 else ''} ignored (limit {limit})"
        if truncated:
            caption += f"; out of actions ({self.max_actions}): the hand is void"
        info = self._info(caption, moves=moves[:executed], moves_executed=executed, moves_dropped=ignored,
                          outcome=outcome, success=outcome == "won")
        return self._obs(), reward, terminated, truncated, info

    def _stick_caption(self, natural: bool, reward: float) -> str:
        player, dealer = sum_hand(self.game.player), sum_hand(self.game.dealer)
        hidden = f"the dealer turned over {card_name(self.game.dealer[1])}"
        drawn = self.game.dealer[2:]
        if drawn:
            hidden += " and drew " + ", ".join(card_name(c) for c in drawn)
        final = f"bust with {dealer}" if is_bust(self.game.dealer) else f"final total {dealer}"
        if natural and reward == 1.0:
            result = "won with a natural"
        elif reward == 1.0:
            result = f"won {player} to {dealer}" if not is_bust(self.game.dealer) else "won: the dealer went bust"
        elif reward == -1.0:
            result = f"lost {player} to {dealer}"
        else:
            result = f"draw at {player}"
        return f"stuck on {player}; {hidden}: {final}; {result}"

    def render(self):
        if self.render_mode == "ansi":
            return render_ansi(self.game.player, self.game.dealer, self.finished)
        return None


def render_ansi(player: list[int], dealer: list[int], show_dealer: bool) -> str:
    """Both hands as text; the dealer's hole card stays hidden until the hand is over."""
    face = {1: "A", 10: "10"}
    shown = dealer if show_dealer else dealer[:1]
    dealer_text = " ".join(face.get(c, str(c)) for c in shown) + ("" if show_dealer else " ??")
    player_text = " ".join(face.get(c, str(c)) for c in player)
    ace = ", usable ace" if usable_ace(player) else ""
    dealer_sum = f" ({sum_hand(dealer)})" if show_dealer else ""
    return f"dealer: {dealer_text}{dealer_sum}\nyou:    {player_text} ({sum_hand(player)}{ace})"


# ---- exact ground truth ---------------------------------------------------------------
CARD_P: dict[int, float] = {c: (4 / 13 if c == 10 else 1 / 13) for c in range(1, 11)}


def add_card(total: int, usable: bool, card: int) -> tuple[int, bool]:
    """(sum, usable ace) after drawing `card`. Markov in (sum, usable): an ace that is not
    usable only exists at hard 12+, where no later ace can be usable either."""
    hard = (total - 10 if usable else total) + card
    soft = (usable or card == 1) and hard + 10 <= 21
    return (hard + 10, True) if soft else (hard, False)


class BlackjackSolver:
    """Exact optimum of the infinite-deck game by dynamic programming: the dealer's final
    total distribution per up card, then V*(hand) = max(stick, hit) over (sum, usable
    ace, up card), plus the probability of winning under the optimal policy."""

    def __init__(self) -> None:
        self._dealer: dict[int, dict[int, float]] = {d: self._dealer_final(d) for d in range(1, 11)}
        self._memo: dict[Hand, tuple[float, float, str]] = {}

    @staticmethod
    def _dealer_final(up: int) -> dict[int, float]:
        """P(dealer's final total) for an up card; 22 stands for bust. Stands on 17+ (soft too)."""
        memo: dict[tuple[int, bool], dict[int, float]] = {}

        def dist(total: int, usable: bool) -> dict[int, float]:
            if total > 21:
                return {22: 1.0}
            if total >= 17:
                return {total: 1.0}
            key = (total, usable)
            if key not in memo:
                out: dict[int, float] = {}
                for card, p in CARD_P.items():
                    for final, q in dist(*add_card(total, usable, card)).items():
                        out[final] = out.get(final, 0.0) + p * q
                memo[key] = out
            return memo[key]

        return dist(11, True) if up == 1 else dist(up, False)

    def dealer_final(self, up: int) -> dict[int, float]:
        return dict(self._dealer[up])

    def _stick(self, total: int, up: int) -> tuple[float, float]:
        """(expected reward, P(win)) of sticking on `total`."""
        value = win = 0.0
        for final, p in self._dealer[up].items():
            if final == 22 or total > final:
                value, win = value + p, win + p
            elif total < final:
                value -= p
        return value, win

    def _solve(self, hand: Hand) -> tuple[float, float, str]:
        if hand in self._memo:
            return self._memo[hand]
        stick_v, stick_w = self._stick(hand.player_sum, hand.dealer_card)
        hit_v = hit_w = 0.0
        for card, p in CARD_P.items():
            total, usable = add_card(hand.player_sum, hand.usable_ace, card)
            if total > 21:
                hit_v -= p
            else:
                v, w, _ = self._solve(Hand(total, hand.dealer_card, usable))
                hit_v, hit_w = hit_v + p * v, hit_w + p * w
        best = (stick_v, stick_w, STICK) if stick_v >= hit_v else (hit_v, hit_w, HIT)
        self._memo[hand] = best
        return best

    def value(self, hand: Hand, natural: bool = False) -> float:
        """V*(hand): the expected reward of optimal play from here. A natural (an ace and a
        10 as dealt) sticks and wins unless the dealer has a natural too."""
        if natural:
            return 1.0 - self.dealer_natural(hand.dealer_card)
        return self._solve(parse_hand(hand))[0]

    def start_value(self, hand: Hand) -> float:
        """V* of a dealt hand: a soft 21 as dealt is a natural."""
        hand = parse_hand(hand)
        return self.value(hand, natural=hand.usable_ace and hand.player_sum == 21)

    def expected_return(self) -> float:
        """The optimal policy's expected reward per hand over the real deal distribution."""
        return sum(p * self.start_value(hand) for p, hand in self.deals())

    def deals(self):  # noqa: ANN201
        """(probability, dealt hand) over every two-card deal and up card."""
        for a, pa in CARD_P.items():
            for b, pb in CARD_P.items():
                s, u = add_card(*add_card(0, False, a), b)
                for d, pd in CARD_P.items():
                    yield pa * pb * pd, Hand(s, d, u)

    def win_rate(self) -> float:
        """P(win) of the optimal policy over the real deal distribution (a natural wins
        unless the dealer has one)."""
        total = 0.0
        for p, hand in self.deals():
            natural = hand.usable_ace and hand.player_sum == 21
            total += p * ((1.0 - self.dealer_natural(hand.dealer_card)) if natural else self.win_probability(hand))
        return total

    def win_probability(self, hand: Hand) -> float:
        return self._solve(parse_hand(hand))[1]

    def action(self, hand: Hand) -> str:
        """The optimal move (hit or stick) in this hand; ties stick."""
        return self._solve(parse_hand(hand))[2]

    def values(self, gamma: float = 1.0) -> dict[Hand, float]:  # noqa: ARG002 - see below
        """V* of every hand the player can act in (every start hand plus hard 21). The
        reward comes once, when the hand ends, and most hands end within one action, so
        the solver's values are undiscounted whatever the caller's gamma."""
        hands = start_hands() + [Hand(21, d, False) for d in range(1, 11)]
        return {h: self.value(h) for h in hands}

    def plan_return(self, hand: Hand, moves: Iterable[str], start: bool = False) -> float:
        """The expected reward of playing `moves` in order from `hand` (open loop: the
        list does not see the cards), then on optimally if the hand is still open.
        `start`: `hand` is as dealt, so a soft 21 is a natural. Exact, over the
        infinite deck: the oracle's score of a move list."""
        hand, moves = parse_hand(hand), list(moves)
        natural = start and hand.usable_ace and hand.player_sum == 21
        if not moves:
            return self.value(hand, natural=natural)
        if moves[0] == STICK:
            return self.value(hand, natural=True) if natural else self._stick(hand.player_sum, hand.dealer_card)[0]
        total = 0.0
        for card, p in CARD_P.items():
            s, usable = add_card(hand.player_sum, hand.usable_ace, card)
            total += p * (-1.0 if s > 21 else self.plan_return(Hand(s, hand.dealer_card, usable), moves[1:]))
        return total

    def policy_return(self, hand: Hand, answers: Mapping[Hand, Iterable[str]], max_actions: int = 10,
                      max_moves: int = LIST_MAX_MOVES) -> float:
        """The exact expected reward of a deterministic actor from the dealt `hand`: it
        answers `answers[h]` (a move list) whenever it acts in hand h, the env's limits
        apply (at most `max_moves` moves per action; a hand still open after
        `max_actions` actions is void, reward 0). A hand missing from `answers` gets the
        optimal move (only hard 21 is never dealt). Noise-free, unlike a win rate over
        a few hundred deals."""
        answers = {parse_hand(h): list(m)[:max_moves] for h, m in answers.items()}
        memo: dict[tuple[Hand, tuple[str, ...], int, bool], float] = {}

        def go(h: Hand, moves: tuple[str, ...], left: int, dealt: bool) -> float:
            if not moves:  # the list is used up and the hand is open: the next action
                nxt = tuple(answers.get(h, [self.action(h)]))
                return 0.0 if left == 0 or not nxt else go(h, nxt, left - 1, dealt)
            key = (h, moves, left, dealt)
            if key not in memo:
                if moves[0] == STICK:
                    natural = dealt and h.usable_ace and h.player_sum == 21
                    memo[key] = self.value(h, natural=True) if natural else self._stick(h.player_sum, h.dealer_card)[0]
                else:
                    total = 0.0
                    for card, p in CARD_P.items():
                        s, usable = add_card(h.player_sum, h.usable_ace, card)
                        total += p * (-1.0 if s > 21 else go(Hand(s, h.dealer_card, usable), moves[1:], left, False))
                    memo[key] = total
            return memo[key]

        return go(parse_hand(hand), (), max_actions, True)

    def plan(self, hand: Hand) -> list[str]:
        """The best one-action move list: the optimal move alone (after a hit, the next
        card decides what follows, so an open-loop list can only be worse)."""
        return [self.action(hand)]

    def q_values(self, hand: Hand) -> dict[str, float]:
        hand = parse_hand(hand)
        stick_v, _ = self._stick(hand.player_sum, hand.dealer_card)
        hit_v = 0.0
        for card, p in CARD_P.items():
            total, usable = add_card(hand.player_sum, hand.usable_ace, card)
            hit_v += -p if total > 21 else p * self._solve(Hand(total, hand.dealer_card, usable))[0]
        return {HIT: hit_v, STICK: stick_v}

    @staticmethod
    def dealer_natural(up: int) -> float:
        return CARD_P[10] if up == 1 else (CARD_P[1] if up == 10 else 0.0)
