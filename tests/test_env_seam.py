"""The env seam: the same rollouts, evaluation and CLI commands play Blackjack through
`--env blackjack`, with captions, seeds and the exact optimum recorded; the grid is
unchanged."""

from __future__ import annotations

import json
import re

import pytest

from lactchain.envs.blackjack import BLACKJACK_MOVES, BlackjackSolver, BlackjackTextEnv, Hand
from lactchain.loop.evaluate import evaluate_actor
from lactchain.models.actor import Sample
from lactchain.moves import STRICT, format_moves
from lactchain.runs.registry import Registry
from lactchain.loop.rollout import RolloutConfig, run_rollouts

_HAND_RE = re.compile(r"Your sum is (\d+)( with a usable ace)?; the dealer shows (an ace|a (\d+))")


class PromptReadingBlackjackOracle:
    """Answers the exact optimum's move for the hand it READS from the prompt: checks
    that the prompt carries the state, and is the evaluation's upper bound."""

    moves = BLACKJACK_MOVES

    def __init__(self) -> None:
        self.solver = BlackjackSolver()
        self.prompts: list[str] = []

    def generate(self, prompts, **_kw):
        out = []
        for prompt in prompts:
            self.prompts.append(prompt)
            if "natural blackjack" in prompt:
                moves = ["stick"]
            else:
                m = _HAND_RE.search(prompt)
                assert m, prompt
                dealer = 1 if m.group(3) == "an ace" else int(m.group(4))
                moves = self.solver.plan(Hand(int(m.group(1)), dealer, bool(m.group(2))))
            out.append(Sample(format_moves(moves), moves, STRICT, 0.0, 0))
        return out


def test_blackjack_rollouts_record_captions_seeds_and_hands(tmp_path):
    reg = Registry(tmp_path / "r.db")
    run = reg.create_run("play")
    actor = PromptReadingBlackjackOracle()
    cfg = RolloutConfig(episodes=12, n_envs=4, seed=2, env="blackjack")
    summary = run_rollouts(actor, cfg, registry=reg, run_id=run)
    assert len(summary.episodes) == 12 and all(e.length >= 1 for e in summary.episodes)
    assert "Blackjack: Your sum is" in actor.prompts[0] or "natural blackjack" in actor.prompts[0]
    assert "1. hit\n2. stick" in actor.prompts[0]
    steps = reg.steps(run_id=run)
    assert {"player_sum", "dealer_card", "usable_ace"} == set(steps[0]["state"])
    assert all(s["caption"] for s in steps)
    finished = [s for s in steps if s["done"]]
    assert len(finished) == 12
    assert all(re.search(r"bust|won|lost|draw", s["caption"]) for s in finished)
    # The same seed deals the same hands: the episodes replay.
    again = run_rollouts(PromptReadingBlackjackOracle(), cfg)
    assert [e.start_state for e in again.episodes] == [e.start_state for e in summary.episodes]
    assert [e.total_return for e in again.episodes] == [e.total_return for e in summary.episodes]


def test_evaluate_plays_seeded_deals_against_the_optimum_on_the_same_deals():
    """Blackjack is measured on the real deal distribution (each episode's seed deals its
    hand; "all" = the env's `evaluation_deals`), not the 270 hands uniformly, and against
    the optimum replayed on those very cards: an actor that plays the optimum matches it."""
    result = evaluate_actor(PromptReadingBlackjackOracle(), env="blackjack", n_envs=32, seed=3)
    assert result["states"] == result["deals"] == BlackjackTextEnv.evaluation_deals == 1000
    assert result["optimal_move_rate"] == 1.0  # reads the hand from the prompt and plays the DP's move
    assert result["greedy_expected_return"] == pytest.approx(result["optimal_mean_return"])  # exact, no card noise
    assert result["win_rate"] == result["optimal_win_rate_same_deals"] == result["success_rate"]
    assert 0.39 < result["win_rate"] < 0.48  # the optimum's 43.3 %, within 1000 deals' noise
    assert result["parse_failure_rate"] == 0.0
    env = BlackjackTextEnv()
    hands = []
    for i in range(1000):
        env.reset(seed=3 * 1_000_003 + i)  # the episode's seed deals its start hand
        hands.append(env.state)
    # Hard 20 is two ten-cards (9.5 % of deals) but 10 of the 270 hands (3.7 %) uniformly.
    assert sum(h.player_sum == 20 and not h.usable_ace for h in hands) / 1000 > 0.07
    assert evaluate_actor(PromptReadingBlackjackOracle(), env="blackjack", states=40)["deals"] == 40


def test_play_and_evaluate_take_env_blackjack_with_the_tiny_actor(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "tiny", "--env", "blackjack", "--episodes", "4", "--envs", "2",
                           "--seed", "3", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    reg = Registry(db)
    assert reg.params(out["run_id"])["env"] == "blackjack"
    assert out["mean_optimal_ratio"] is None  # no shortest move count in Blackjack: not measured, not 0
    steps = reg.steps(run_id=out["run_id"])
    assert steps and all(set(s["moves"]) <= {"hit", "stick"} for s in steps)
    assert "Blackjack:" in steps[0]["prompt"] or "natural blackjack" in steps[0]["prompt"]
    assert all(s["caption"] for s in steps) and sum(s["done"] for s in steps) == 4
    assert reg.params(out["run_id"])["strategy_text"].startswith("You are playing blackjack")
    code, stdout, err = lc("evaluate", "--actor", "tiny", "--env", "LactChain/Blackjack-v0", "--states", "6",
                           "--db", db, "--json")
    assert code == 0, err
    ev = json.loads(stdout)
    assert ev["states"] == 6 and 0.0 <= ev["optimal_move_rate"] <= 1.0 and "optimal_mean_return" in ev
    assert reg.params(ev["run_id"])["env"] == "blackjack"  # the id is stored by its short name


def test_unknown_env_fails_in_one_line(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, _, err = lc("play", "--actor", "tiny", "--env", "chess", "--db", db)
    assert code == 2 and "unknown env 'chess'; known envs: grid" in err
    assert len(err.strip().splitlines()) == 1 and not db.exists()


def test_bench_learn_takes_every_env_and_refuses_an_unknown_one(tmp_path, lc):
    """bench learn runs on any registered env (its transfer target is the env's own);
    an unknown env is one line before any run exists."""
    from lactchain.envs.catalog import ENVS, env_class

    db = tmp_path / "registry.db"
    code, _, err = lc("bench", "learn", "--env", "chess", "--db", db)
    assert code == 2 and "unknown env 'chess'" in err
    assert len(err.strip().splitlines()) == 1 and not db.exists()
    for name in ENVS:  # a transfer target, where there is one, is an evaluation of the same env
        target = env_class(name).transfer
        assert target is None or (isinstance(target[0], str) and isinstance(target[1], dict))


def test_train_critic_refuses_play_runs_of_another_env_in_one_line(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "tiny", "--episodes", "2", "--db", db, "--json")
    assert code == 0, err
    grid_run = json.loads(stdout)["run_id"]
    before = len(Registry(db).list_runs())
    code, _, err = lc("train-critic", "--critic", "tiny", "--env", "blackjack", "--episodes-from", grid_run, "--db", db)
    assert code == 2 and f"{grid_run} played grid, not blackjack" in err
    assert len(err.strip().splitlines()) == 1 and len(Registry(db).list_runs()) == before


def test_the_pipeline_runs_on_blackjack_with_candidates_compared_on_the_same_deals(tmp_path, lc):
    """The whole loop on Blackjack with the tiny models: a critic fitted by TD on
    seeded deals, pairs whose two lists met the same --deals cards, the actor
    trained, evaluation against the exact optimum."""
    db = tmp_path / "registry.db"
    code, stdout, err = lc("pipeline", "--env", "blackjack", "--actor", "tiny", "--critic", "tiny", "--states", "8",
                           "--eval-states", "8", "--td-lists-per-state", "16", "--explore", "8", "--deals", "4",
                           "--actor-epochs", "1", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    reg = Registry(db)
    assert reg.params(out["run_id"])["env"] == "blackjack" and reg.params(out["run_id"])["deals"] == 4
    kinds = [c["kind"] for c in sorted(reg.list_runs(parent_id=out["run_id"]), key=lambda r: r["created_ms"])]
    assert kinds == ["critic", "eval", "pairs", "critic", "actor", "eval"]
    assert -1.0 <= out["critic_spearman_vstar"] <= 1.0
    assert 0.0 <= out["after"]["optimal_move_rate"] <= 1.0 and out["after"]["mean_optimal_ratio"] is None
    pairs_run = next(c["id"] for c in reg.list_runs(parent_id=out["run_id"]) if c["kind"] == "pairs")
    pairs = reg.pairs(run_ids=[pairs_run])
    assert pairs and all(set(p["state"]) == {"player_sum", "dealer_card", "usable_ace"} for p in pairs)
    assert all(len(p["meta"]["seeds"]) == 4 for p in pairs)  # both lists of a pair met the same 4 deals
    assert all(p["prompt"].rstrip().endswith(".") and "Blackjack:" in p["prompt"] for p in pairs)
    assert all(set(p["chosen"]) | set(p["rejected"]) <= {"hit", "stick"} for p in pairs)


@pytest.mark.e2e
def test_smollm2_plays_blackjack_with_constrained_decoding(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "smollm2-135m", "--env", "blackjack", "--episodes", "4", "--envs", "4",
                           "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    assert out["episodes"] == 4 and out["parse_failure_rate"] == 0.0  # always a valid list of hit/stick
    steps = Registry(db).steps(run_id=out["run_id"])
    assert all(set(s["moves"]) <= {"hit", "stick"} and s["moves"] for s in steps)
    assert sum(s["done"] for s in steps) == 4


def test_play_and_evaluate_take_a_scene(tmp_path, lc):
    """--scene flat: the 8x8 flat with its landmarks in the prompt; refused off the grid."""
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "tiny", "--scene", "flat", "--episodes", "2", "--envs", "2",
                           "--max-actions", "2", "--db", db, "--json")
    assert code == 0, err
    run = json.loads(stdout)["run_id"]
    reg = Registry(db)
    assert reg.params(run)["scene"] == "flat"
    prompt = reg.steps(run_id=run)[0]["prompt"]
    assert "8x8" in prompt and "of the sofa" in prompt
    code, stdout, err = lc("evaluate", "--actor", "tiny", "--scene", "flat", "--states", "3", "--max-actions", "1",
                           "--db", db, "--json")
    assert code == 0, err
    assert json.loads(stdout)["states"] == 3
    code, stdout, err = lc("evaluate", "--actor", "tiny", "--states", "1000", "--max-actions", "1", "--envs", "60",
                           "--db", db, "--json")  # more than the 4x4 grid has: all 60, and the log says so
    assert code == 0 and json.loads(stdout)["states"] == 60 and "greedy from 60 start states" in err, err
    for argv, message in ((["--scene", "attic"], "unknown scene 'attic'; known scenes: empty, flat"),
                          (["--scene", "flat", "--env", "blackjack"], "scenes are the grid's")):
        before = len(reg.list_runs())
        code, _, err = lc("play", "--actor", "tiny", *argv, "--db", db)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1
        assert len(reg.list_runs()) == before


# ---- the seam's members: every env of the catalog offers them (a new env is checked by registering it)
def _catalog():
    from lactchain.envs.catalog import ENVS

    return list(ENVS)


@pytest.mark.parametrize("name", _catalog())
def test_every_env_offers_the_seam_members(name):
    from lactchain.envs.catalog import TextEnv, env_class, make_env
    from lactchain.envs.replay import EndState, execute_from, stored_state
    from lactchain.motif.judge import render_judge_prompt
    from lactchain.prompts import PromptSpec

    cls, env = env_class(name), make_env(name)
    assert isinstance(env, TextEnv) and isinstance(env, cls) and env.name == name
    for text in (cls.judge_description, cls.judge_goal, cls.lab_blurb, *cls.outcome_words):
        assert isinstance(text, str) and text.strip()
    assert len(cls.outcome_words) == 2 and cls.console_view in ("grid", "cards", "text")
    assert isinstance(cls.has_scenes, bool) and isinstance(cls.classic_kwargs, dict)
    assert cls.transfer is None or (isinstance(cls.transfer[0], str) and isinstance(cls.transfer[1], dict))
    assert set(env.moves) <= set(cls.all_moves)
    assert cls.judge_description in render_judge_prompt(name, "a", "b")
    env.reset(seed=0)
    starts = list(env.start_states())
    widths = {len(env.state_features(s)) for s in starts[:: max(1, len(starts) // 20)]}
    assert len(widths) == 1 and widths.pop() > 0
    assert env.state_features(starts[0]).dtype.name == "float32"
    texts = env.vocabulary_texts()
    assert texts and all(isinstance(t, str) for t in texts)
    assert env.render_text().strip() and env.headline(env.state).strip()
    plan = cls.plan_from_prompt(PromptSpec.for_env(env).render(env.describe()))
    assert plan is not None and set(plan) <= set(cls.all_moves)  # it reads its own prompt
    assert cls.plan_from_prompt("Nothing to see here.") is None
    seed = 3 if env.stochastic else None
    reward, nxt, done = execute_from(env, starts[0], [env.moves[0]], seed)
    assert execute_from(env, starts[0], [env.moves[0]], seed) == (reward, nxt, done)  # replays exactly
    back = stored_state(env, nxt.as_dict())
    assert back == nxt or isinstance(back, EndState)
    assert env.parse_state(starts[0].as_dict()) == starts[0]


def test_the_tiny_vocabulary_has_every_envs_moves_and_prompt_words():
    """Every env's prompt words are tiny tokens, except the pieces that would let a
    constrained answer begin a move it cannot finish (a proper prefix of a move's word)."""
    from lactchain.envs.catalog import ENVS, make_env
    from lactchain.models.tiny import _pre_tokenizer, build_vocab, move_prefixes
    from lactchain.prompts import PromptSpec

    vocab, pre, hazards = build_vocab(), _pre_tokenizer(), move_prefixes()
    assert not hazards & set(vocab)
    for name in ENVS:
        env = make_env(name)
        env.reset(seed=0)
        assert all(p in vocab for m in env.moves for p, _ in pre.pre_tokenize_str(format_moves([m])))
        text = PromptSpec.for_env(env).render(env.describe())
        missing = {p for p, _ in pre.pre_tokenize_str(text) if p not in vocab} - hazards
        assert not missing, f"{name}: {sorted(missing)}"


def test_the_oracle_reads_every_envs_prompt():
    from lactchain.envs.catalog import make_env, oracle_plan
    from lactchain.prompts import PromptSpec

    grid = make_env("grid")
    grid.reset()
    assert oracle_plan(PromptSpec.for_env(grid).render(grid.describe()))[0] == grid.solver().plan(grid.state)
    bj = make_env("blackjack")
    bj.reset(options={"state": {"player_sum": 12, "dealer_card": 10, "usable_ace": False}})
    moves, known = oracle_plan(PromptSpec.for_env(bj).render(bj.describe()))
    assert moves == [BlackjackSolver().action(Hand(12, 10, False))] and known == BLACKJACK_MOVES
    assert oracle_plan("no env says this") is None


def test_env_list_names_every_registered_env(lc):
    from lactchain.envs.catalog import ENVS

    code, out, err = lc("env", "list", "--json")
    assert code == 0, err
    rows = {r["env"]: r for r in json.loads(out)}
    assert set(rows) == set(ENVS)
    assert all(r["gym_id"] == ENVS[name] and r["moves"] and r["start_states"] > 0 for name, r in rows.items())
