"""Captions collected into the registry, paired and judged: parsing of judge answers,
retries, the rule judge as calibration reference, and the `collect`/`judge` CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from lactchain.motif.captions import captioned_episodes, collect_runs, replay_episode
from lactchain.envs.blackjack import BlackjackTextEnv
from lactchain.motif.judge import (
    FIRST,
    SECOND,
    TIE,
    LLMJudge,
    RuleJudge,
    agreement,
    check_judge_template,
    label_rows,
    pair_episodes,
    parse_judgement,
    render_judge_prompt,
)
from lactchain.prompts import PromptError
from lactchain.runs.registry import Registry


@pytest.mark.parametrize("text,expected", [
    ("1", FIRST), (" 2", SECOND), ("Episode 1 is better", FIRST), ("2.", SECOND), ("tie", TIE), ("Tie.", TIE),
    ("neither", TIE), ("two", SECOND), ("", None), ("   ", None), ("banana", None), ("12 is my answer", None),
    ("The first one", None), (None, None), ("[1]", FIRST), ("1, 2", None), ("1 or 2", None), ("2/1", None),
    ("1. The second episode is worse", FIRST),
])
def test_judge_answers_parse_strictly(text, expected):
    assert parse_judgement(text) == expected


def test_a_judge_prompt_must_show_both_captions():
    prompt = render_judge_prompt("blackjack", "stuck on 20; won", "bust with 25")
    assert "Episode 1: stuck on 20; won" in prompt and "Episode 2: bust with 25" in prompt and "1, 2, tie" in prompt
    with pytest.raises(PromptError, match=r"lacks \{caption_2\}"):
        check_judge_template("compare {caption_1}")
    with pytest.raises(PromptError, match="unknown slot"):
        check_judge_template("{caption_1} {caption_2} {weather}")


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    reg = Registry(tmp_path_factory.mktemp("judge") / "r.db")
    env = BlackjackTextEnv()
    runs = collect_runs(reg, env, ("random", "optimal"), 120, seed=4)
    return reg, runs


def test_collected_episodes_replay_and_pair_by_dealt_hand(collected):
    reg, runs = collected
    episodes = captioned_episodes(reg, runs)
    assert len(episodes) == 240 and all(e.caption for e in episodes)
    env = BlackjackTextEnv()
    assert all(replay_episode(env, reg, e.episode_id, e.run_id) for e in episodes[::10])
    # A corrupted step no longer replays.
    step = reg.steps(episode_id=episodes[0].episode_id)[0]
    with reg._write() as db:  # noqa: SLF001 - corrupt the stored caption on purpose
        db.execute("UPDATE steps SET caption = 'hit and drew a joker' WHERE id = ?", [step["id"]])
    assert not replay_episode(env, reg, episodes[0].episode_id, episodes[0].run_id)
    pairs = pair_episodes(episodes, 50, "state", seed=1)
    assert all(a.start_state == b.start_state and a.episode_id != b.episode_id for a, b in pairs)
    assert all(a.caption != b.caption or a.start_state == b.start_state for a, b in pairs)
    with pytest.raises(ValueError, match="at least 2"):
        pair_episodes(episodes[:1], 3)


def test_the_rule_judge_agrees_with_the_true_return_on_every_pair(collected):
    reg, runs = collected
    pairs = pair_episodes(captioned_episodes(reg, runs), 80, "random", seed=2)
    rows = label_rows(pairs, RuleJudge().judge(pairs, "blackjack"), RuleJudge(), "blackjack")
    assert agreement(rows) == {"pairs": 80, "answered_rate": 1.0, "agreement": 1.0}
    for row in rows:
        if row["status"] == "labeled":
            assert row["chosen_score"] > row["rejected_score"] and row["labeler"] == "oracle"
        else:
            assert row["status"] == "tie" and row["chosen_score"] == row["rejected_score"]


@dataclass
class _Sample:
    text: str


class ScriptedModel:
    """Stands in for the judge's language model: answers from a script, one per call
    and prompt, recording what it was asked (the judge's retry logic is under test)."""

    name = "scripted"

    def __init__(self, script):
        self.script, self.calls = list(script), []

    def generate(self, prompts, **kw):
        self.calls.append((len(prompts), kw["temperature"], kw["constrained"]))
        return [_Sample(self.script.pop(0)) for _ in prompts]


def test_llm_judge_retries_unparsable_answers_and_never_labels_unknown(collected):
    reg, runs = collected
    pairs = pair_episodes(captioned_episodes(reg, runs), 3, "random", seed=3)
    model = ScriptedModel(["1", "banana", "", "2", "???", "nope"])
    judge = LLMJudge(model, retries=3)
    result = judge.judge(pairs, "blackjack")
    # first call: 3 prompts greedily; then only the two unparsable ones, then only the still-garbage one.
    assert model.calls == [(3, 0.0, False), (2, 0.8, False), (1, 0.8, False)]
    assert [j.answer for j in result] == [FIRST, SECOND, None]
    assert [j.tries for j in result] == [1, 2, 3] and result[2].raw == "nope"
    rows = label_rows(pairs, result, judge, "blackjack")
    assert [r["status"] for r in rows][2] == "skipped" and rows[2]["meta"]["answer"] == "unknown"
    assert rows[0]["labeler"] == "llm" and rows[0]["meta"]["raw_answer"] == "1"
    assert rows[1]["chosen"] == pairs[1][1].caption  # "2": the second caption is chosen
    reg.add_pairs(runs[0], rows)
    stored = reg.pairs(runs[0])
    assert {p["status"] for p in stored} >= {"labeled", "skipped"}
    assert all(p["meta"]["prompt_version"] == "motif-v1" for p in stored)


def test_a_judge_that_answers_nothing_has_no_agreement_rather_than_zero(collected):
    """Every answer unparsable: agreement is None (n/a), not 0.000, which would read as a
    judge that always picks the worse episode."""
    from lactchain.motif.judge import agreement_text

    reg, runs = collected
    pairs = pair_episodes(captioned_episodes(reg, runs), 2, "random", seed=3)
    judge = LLMJudge(ScriptedModel(["?", "??"]), retries=1)
    stats = agreement(label_rows(pairs, judge.judge(pairs, "blackjack"), judge, "blackjack"))
    assert stats == {"pairs": 2, "answered_rate": 0.0, "agreement": None}
    assert agreement_text(stats) == "agreement n/a (answered none)"
    assert agreement_text({"agreement": 0.5, "answered_rate": 1.0}) == "agreement 0.500, answered 1.000"


def _ok(result) -> dict:  # noqa: ANN001
    code, out, err = result
    assert code == 0, err
    return json.loads(out)


def test_collect_and_judge_cli_end_to_end(tmp_path, lc):
    db = str(tmp_path / "r.db")
    ids = [_ok(lc("collect", "--policy", policy, "-n", "60", "--seed", "1", "--db", db, "--json"))["run_id"]
           for policy in ("random", "optimal")]
    out = _ok(lc("judge", "--from", ids[0], "--from", ids[1], "--judge", "rule", "--pairs", "40", "--db", db, "--json"))
    assert out["agreement"] == 1.0 and out["pairs"] == 40
    reg = Registry(db)
    assert len(reg.pairs(out["run_id"])) == 40 and reg.params(out["run_id"])["env"] == "blackjack"
    tiny = _ok(lc("judge", "--from", ids[0], "--judge", "tiny", "--pairs", "4", "--retries", "2", "--db", db, "--json"))
    assert tiny["pairs"] == 4 and 0.0 <= tiny["answered_rate"] <= 1.0
    # an LLM judge answers at the loop's dtype (auto, recorded resolved), not the weights' float32
    from lactchain.machine import resolve_dtype

    assert reg.params(tiny["run_id"])["dtype"] == resolve_dtype("auto") == \
        json.loads(reg.tags(tiny["run_id"])["generation"])["dtype"]
    assert reg.params(out["run_id"]).get("dtype") is None  # the rule judge generates nothing
    for pair in reg.pairs(tiny["run_id"]):
        assert pair["labeler"] == "llm" and pair["meta"]["judge"] == "tiny" and "raw_answer" in pair["meta"]
        assert (pair["status"] == "skipped") == (pair["meta"]["answer"] == "unknown")


@pytest.mark.parametrize("args,message", [
    (["judge", "--from", "nope"], "--from nope: no run"),
    (["judge", "--from", "RUN", "--judge", "gpt-17"], "gpt-17"),
    (["judge", "--from", "RUN", "--pairing", "sorted"], "must be one of random, state"),
    (["judge", "--from", "RUN", "--dtype", "float16"], "only applies to an LLM judge"),
    (["judge", "--from", "RUN", "--judge", "tiny", "--dtype", "float8"], "--dtype"),
    (["collect", "--policy", "genius"], "must be one of random, optimal, q-learning"),
    (["collect", "--env", "grid", "--policy", "optimal"], "no exact solver with one optimal move"),
])
def test_bad_collect_and_judge_input_is_one_line(tmp_path, lc, args, message):
    db = str(tmp_path / "r.db")
    run = _ok(lc("collect", "--policy", "random", "-n", "3", "--db", db, "--json"))["run_id"]
    before = len(Registry(db).list_runs())
    code, _, err = lc(*[run if a == "RUN" else a for a in args], "--db", db)
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert len(Registry(db).list_runs()) == before


def test_the_judge_labeler_ranks_grid_candidates_from_their_captions():
    """The same seam as the critic: a judge scores a group's candidates pairwise; with the
    rule judge, the candidate with the best reward gets the top advantage."""
    from lactchain.envs import GridWorldEnv, State
    from lactchain.loop.labelers import Candidate, Group, JudgeLabeler, execute_from, make_labeler

    env = GridWorldEnv()
    start = State(0, 0, "east")
    group = Group(start, "", [])
    for moves in (["move forward"] * 3 + ["turn left"] + ["move forward"] * 3, ["turn left", "turn left"],
                  ["move forward"]):
        reward, nxt, done = execute_from(env, start, moves)
        group.candidates.append(Candidate(moves, "", "strict", reward, nxt, done))
    labeler = JudgeLabeler(RuleJudge(), GridWorldEnv())
    labeler.score([group])
    advantages = [c.advantage for c in group.candidates]
    assert advantages == [1.0, -1.0, 0.0] and labeler.name == "oracle"
    assert "reached the goal" in labeler.caption(start, group.candidates[0].moves)
    assert "You are at (x=0, y=0) facing east" in labeler.caption(start, ["turn left"])
    model = ScriptedModel(["2", "1", "tie"])
    llm = make_labeler("judge", env=GridWorldEnv(), gamma=0.9, judge=LLMJudge(model))
    llm.score([group])
    # pairs (0,1) -> 2 wins, (0,2) -> 1 wins, (1,2) -> tie
    assert [c.advantage for c in group.candidates] == [0.0, 0.5, -0.5] and llm.name == "llm"
    with pytest.raises(ValueError, match="needs a judge or the actor"):
        make_labeler("judge", env=GridWorldEnv(), gamma=0.9)
    # Large groups: each candidate meets only its next `opponents` neighbours (cost ~ K, not K^2).
    three = GridWorldEnv(moves=("move forward", "turn left", "turn right"))
    big = Group(start, "", [Candidate([m] * n, "", "strict", *execute_from(three, start, [m] * n))
                            for m in ("move forward", "turn left", "turn right") for n in range(1, 11)])
    counting = ScriptedModel(["1"] * 1000)
    JudgeLabeler(LLMJudge(counting), GridWorldEnv(moves=("move forward", "turn left", "turn right")),
                 opponents=2).score([big])
    judged = sum(n for n, _, _ in counting.calls)
    assert judged <= 2 * len(big.candidates) and all(-1.0 <= c.advantage <= 1.0 for c in big.candidates)


def test_a_killed_judge_run_resumes_where_its_labels_end(tmp_path, lc):
    """Labels are written batch by batch; `runs resume` judges only the pairs the lineage
    has not labelled, and train-reward reads the whole lineage."""
    import time

    db = str(tmp_path / "r.db")
    ids = [_ok(lc("collect", "--policy", p, "-n", "60", "--seed", "2", "--db", db, "--json"))["run_id"]
           for p in ("random", "optimal")]
    args = ["judge", "--from", ids[0], "--from", ids[1], "--pairs", "40", "--pairing", "random", "--batch-size", "8"]
    full = _ok(lc(*args, "--db", db, "--json"))["run_id"]
    reg = Registry(db)
    expected = [(p["chosen"], p["rejected"]) for p in reg.pairs(full)]
    # A second run, killed after two batches: keep its first 16 labels, as a SIGTERM would.
    killed = _ok(lc(*args, "--db", db, "--json"))["run_id"]
    with reg._write() as conn:  # noqa: SLF001
        conn.execute("DELETE FROM pairs WHERE run_id = ? AND id NOT IN (SELECT id FROM pairs WHERE run_id = ? "
                     "ORDER BY id LIMIT 16)", [killed, killed])
    reg.update_run(killed, status="KILLED")
    resumed = _ok(lc("runs", "resume", killed, "--db", db, "--json"))["run_id"]  # a real detached job
    deadline = time.monotonic() + 120
    while reg.get_run(resumed)["status"] not in ("FINISHED", "FAILED") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert reg.get_run(resumed)["status"] == "FINISHED", reg.get_run(resumed)
    assert len(reg.pairs(resumed)) == 24
    got = [(p["chosen"], p["rejected"]) for r in (killed, resumed) for p in reg.pairs(r)]
    assert got == expected  # the same 40 pairs, each labelled once
    out = _ok(lc("train-reward", "--pairs-from", resumed, "--critic", "tiny", "--epochs", "2", "--db", db, "--json"))
    labelled = sum(p["status"] in ("labeled", "tie") for r in (killed, resumed) for p in reg.pairs(r))
    assert out["train_pairs"] + out["held_out_pairs"] == labelled
    code, _, err = lc(*args[:5], "--pairs", "41", "--resume-from", killed, "--db", db)
    assert code == 2 and "pairs, pairing differ from that run's" in err


def test_forced_choice_judge_always_answers_from_next_token_probabilities(collected, tiny_actor):
    """The real tiny model: every pair gets one of 1, 2, tie (never unknown), and the answer
    is the option with the highest next-token log-probability, recorded as the raw answer."""
    from lactchain.motif.judge import ForcedChoiceJudge

    reg, runs = collected
    pairs = pair_episodes(captioned_episodes(reg, runs), 6, "random", seed=5)
    judge = ForcedChoiceJudge(tiny_actor, both_orders=False)
    result = judge.judge(pairs, "blackjack")
    assert [j.answer in (FIRST, SECOND, TIE) for j in result] == [True] * 6
    logps = tiny_actor.choice_logprobs(judge_prompts := [render_judge_prompt("blackjack", a.caption, b.caption)
                                                         for a, b in pairs], ["1", "2", "tie"])
    assert len(logps) == len(judge_prompts)
    for j, row in zip(result, logps):
        assert j.answer == ("1", "2", "tie")[max(range(3), key=lambda i: row[i])] and j.raw.startswith("log p")
        assert all(lp <= 0.0 for lp in row)
    rows = label_rows(pairs, result, judge, "blackjack")
    assert all(r["status"] in ("labeled", "tie") for r in rows) and rows[0]["meta"]["judge"].endswith("(forced choice)")
    with pytest.raises(ValueError, match="start with the same token"):
        tiny_actor.choice_logprobs(["x"], ["tie", "tie"])
    # Both orders: the swapped reading's '2' counts for the first episode.
    swapped = tiny_actor.choice_logprobs([render_judge_prompt("blackjack", b.caption, a.caption) for a, b in pairs],
                                         ["1", "2", "tie"])
    both = ForcedChoiceJudge(tiny_actor).judge(pairs, "blackjack")
    for j, row, rev in zip(both, logps, swapped):
        scores = [row[0] + rev[1], row[1] + rev[0], row[2] + rev[2]]
        assert j.answer == ("1", "2", "tie")[max(range(3), key=lambda i: scores[i])]
