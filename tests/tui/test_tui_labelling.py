"""Labelling screen: every key press is in the registry at once; undo; blind mode."""

from __future__ import annotations

from tui.screens.labelling import Item, LabellingScreen
from tui_helpers import add_critic_pairs, settle


async def _open(app, pilot) -> LabellingScreen:  # noqa: ANN001
    await pilot.press("3")
    await settle(app, pilot)
    assert isinstance(app.screen, LabellingScreen)
    return app.screen


def _human(registry) -> list[dict]:  # noqa: ANN001
    return registry.pairs(labeler="human")


async def test_label_is_in_the_registry_right_after_the_key_press(make_app, registry):
    ids = add_critic_pairs(registry, 3)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        assert [i.pair["id"] for i in screen.queue] == ids
        first: Item = screen.current
        await pilot.press("a")  # no waiting for workers: the write is awaited by the key handler
        rows = _human(registry)
        assert len(rows) == 1
        row = rows[0]
        assert row["chosen"] == first.a and row["rejected"] == first.b
        assert row["status"] == "labeled" and row["meta"]["source_pair"] == ids[0]
        labels_run = registry.get_run(row["run_id"])
        # a session is not a job: never reaped as one whose process died, never among active jobs
        from lactchain.jobs import reap_dead_runs
        from tui.screens.jobs import fetch_jobs

        assert labels_run["kind"] == "labels" and labels_run["status"] == "FINISHED"
        reap_dead_runs(registry, never_started_after_s=0)
        assert registry.get_run(row["run_id"])["status"] == "FINISHED"
        assert all(j["id"] != labels_run["id"] for j in fetch_jobs(registry, False, {}))
        src = registry.get_pair(ids[0])
        assert src["meta"]["human_pair"] == row["id"] and src["status"] == "labeled"  # critic label kept
        # B and tie
        second = screen.current
        await pilot.press("b")
        rows = _human(registry)
        assert rows[-1]["chosen"] == second.b and rows[-1]["meta"]["choice"] == "B"
        await pilot.press("t")
        assert _human(registry)[-1]["status"] == "tie"
        assert screen.current is None
        assert "pair 3/3" in str(screen.query_one("#label-progress").render())
        assert all(r["run_id"] == labels_run["id"] for r in _human(registry))  # one run per session
    # Its end time is the last label's, not whenever the console quit.
    last = max(r["created_ms"] for r in _human(registry))
    assert registry.get_run(labels_run["id"])["ended_ms"] >= last


async def test_undo_skip_and_blind(make_app, registry):
    ids = add_critic_pairs(registry, 3)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        scores = str(screen.query_one("#label-moves-a").render())
        assert "critic: +" in scores or "critic: -" in scores
        await pilot.press("h")
        assert "hidden" in str(screen.query_one("#label-moves-a").render())
        await pilot.press("a")
        assert len([r for r in _human(registry) if r["status"] == "labeled"]) == 1
        assert _human(registry)[0]["meta"]["blind"] is True
        await pilot.press("u")
        live = [r for r in _human(registry) if r["status"] in ("labeled", "tie")]
        assert live == []
        assert "human_pair" not in (registry.get_pair(ids[0])["meta"] or {})
        assert screen.index == 0
        # skip writes nothing; undo of a skip steps back
        await pilot.press("n")
        assert screen.index == 1 and screen.skipped == 1
        await pilot.press("u")
        assert screen.index == 0 and screen.skipped == 0
        await pilot.press("b")
        assert len([r for r in _human(registry) if r["status"] == "labeled"]) == 1


async def test_pending_human_pairs_are_labelled_in_place(make_app, registry):
    run = registry.create_run("collect-pairs", status="FINISHED")
    (pid,) = registry.add_pairs(run, [{
        "state": {"x": 1, "y": 1, "orientation": "north"}, "prompt": "p",
        "chosen": ["move forward"], "rejected": ["turn left", "move forward"], "labeler": "human",
    }])
    assert registry.get_pair(pid)["status"] == "pending"
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        assert screen.current.pair["id"] == pid
        await pilot.press("b")
        pair = registry.get_pair(pid)
        assert pair["status"] == "labeled" and pair["chosen"] == ["turn left", "move forward"]
        assert len(registry.pairs()) == 1  # no new row
        await pilot.press("u")
        pair = registry.get_pair(pid)
        assert pair["status"] == "pending" and pair["chosen"] == ["move forward"]


async def test_judged_caption_pairs_show_the_judge_and_can_be_overruled(make_app, registry):
    """Pairs from `lactchain judge` (Blackjack hands): both captions, the judge's choice
    and raw answer; a human label that overrules it is counted against the judge."""
    from lactchain.motif.captions import captioned_episodes, collect_runs
    from lactchain.envs.blackjack import BlackjackTextEnv
    from lactchain.motif.judge import RuleJudge, label_rows, pair_episodes

    env = BlackjackTextEnv()
    runs = collect_runs(registry, env, ("random", "optimal"), 40, seed=1)
    pairs = pair_episodes(captioned_episodes(registry, runs), 6, "random", seed=0)

    class LLMStandIn(RuleJudge):  # stored as an llm judge's labels, with raw answers
        name, labeler = "smollm2-135m", "llm"

    judge_run = registry.create_run("judge")
    rows = [r for r in label_rows(pairs, LLMStandIn().judge(pairs, "blackjack"), LLMStandIn(), "blackjack")
            if r["status"] == "labeled"]
    registry.add_pairs(judge_run, rows)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await settle(app, pilot)
        screen = app.screen
        item = screen.current
        assert item is not None and item.captions
        head = str(screen.query_one("#label-state").render())
        assert "judged episodes (blackjack)" in head and "judge smollm2-135m chose" in head and "raw answer" in head
        assert "sum" in head and "vs dealer" in head  # the start hand in the env's words
        assert str(screen.query_one("#label-moves-a").render()) == item.a
        assert not screen.query_one("#label-grid-a").display
        await pilot.press("h")  # blind: the judge's choice is hidden
        assert "judge: hidden" in str(screen.query_one("#label-state").render())
        await pilot.press("h")
        judge_side = "A" if item.a == item.pair["chosen"] else "B"
        await pilot.press("b" if judge_side == "A" else "a")  # overrule the judge
        await settle(app, pilot)
        human = [p for p in registry.pairs(labeler="human")]
        assert human[-1]["meta"]["source_labeler"] == "llm" and human[-1]["meta"]["agrees_with_source"] is False
        assert human[-1]["chosen"] == (item.b if judge_side == "A" else item.a)
        assert "agrees with llm 0/1" in str(screen.query_one("#label-progress").render())


async def test_blackjack_move_list_pairs_show_what_each_list_did_on_the_shared_deal(make_app, registry):
    """collect-pairs/pipeline pairs on Blackjack: no grid; each list's caption on the
    deal both lists met, its reward there and the labeler's score; labelled like any pair."""
    from lactchain.envs.blackjack import Hand
    from lactchain.envs.catalog import make_env
    from lactchain.loop.labelers import Group, ValueLabeler, deal_seeds, execute_candidate
    from lactchain.loop.preferences import PairBatch, pairs_from_groups

    env = make_env("blackjack")
    vstar = env.solver().values(0.9)
    group = Group(Hand(14, 10, False), "Blackjack: Your sum is 14; the dealer shows a 10.",
                  seeds=deal_seeds(env, 2, 8))
    for moves in (["hit", "stick"], ["stick"], ["hit", "hit", "hit", "stick"]):
        group.candidates.append(execute_candidate(env, group, moves))
    labeler = ValueLabeler("critic", lambda states: [vstar.get(s, 0.0) for s in states], 0.9)
    labeler.score([group])
    batch = pairs_from_groups([group], labeler, 0.0, PairBatch())
    registry.add_pairs(registry.create_run("pairs"), batch.pairs)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        item = screen.current
        assert item is not None and not item.captions
        head = str(screen.query_one("#label-state").render())
        assert "blackjack" in head and "sum 14 vs dealer 10" in head and "scored over 8 deals" in head
        a_text = str(screen.query_one("#label-moves-a").render())
        from lactchain.moves import format_moves

        assert a_text.startswith(format_moves(item.a))
        assert "reward" in a_text and ("stuck on" in a_text or "bust" in a_text) and "critic:" in a_text
        assert not screen.query_one("#label-grid-a").display
        await pilot.press("a")
        human = _human(registry)
        assert len(human) == 1 and human[0]["chosen"] == item.a and human[0]["state"]["player_sum"] == 14
