"""Pairs per optimizer step from a token budget (lactchain.train.batch_budget), on the
tiny actor with real TRL trainers and rft's own loop.

Covers: the budget counts the tokens the trainer actually holds (TRL's tokenized DPO
rows, token for token); the step takes as many pairs as fit, the learning rate follows
by the square-root rule and both are recorded in the result; rft and KTO (two rows a
pair) step over the same pairs; the bounds (one pair at least, the data at most, a
multiple of the processes); a budget refused with GRPO, or out of range, in one line
before any run exists.
"""

from __future__ import annotations

import math

import pytest
import torch

from lactchain.config import ConfigError
from lactchain.runs.registry import Registry
from lactchain.train.actor import build_trainer, train_actor
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.batch_budget import pair_tokens, pairs_in_budget
from test_train_actor import small_pairs, tiny


def cfg(**settings) -> TrainActorConfig:
    return TrainActorConfig.from_params(settings)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's steps gain nothing from a second thread on 2 cores
    yield
    torch.set_num_threads(threads)


def test_the_budget_counts_the_tokens_trl_trains_on_and_sizes_the_step(tmp_path):
    actor = tiny()
    pairs = small_pairs(actor, 8)
    trainer, info = build_trainer(actor, pairs, cfg(loss="dpo", max_steps=1, batch_size=2, lr=1e-3),
                                  output_dir=tmp_path / "fixed")
    rows = trainer.train_dataset
    held = sum(2 * len(r["prompt_ids"]) + len(r["chosen_ids"]) + len(r["rejected_ids"]) for r in rows) / len(rows)
    assert pair_tokens(actor, pairs, "dpo") == pytest.approx(held)
    # Without a budget: the batch and lr as given, recorded as such.
    assert (info["batch_size"], info["start_lr"], info["batch_tokens"]) == (2, 1e-3, None)

    budget = int(held * 6.5)  # room for 6 pairs
    trainer, info = build_trainer(tiny(), pairs, cfg(loss="simpo", max_steps=1, batch_size=2, lr=1e-3,
                                                    batch_tokens=budget), output_dir=tmp_path / "budget")
    assert info["batch_size"] == 6 and info["batch_tokens"] == budget
    assert info["tokens_per_pair"] == pytest.approx(held, abs=0.1)
    assert info["start_lr"] == pytest.approx(1e-3 * math.sqrt(6 / 2))
    assert trainer.args.per_device_train_batch_size == 6
    assert trainer.args.learning_rate == pytest.approx(1e-3 * math.sqrt(3))
    # CPO's rows hold the prompt inside each side: the same tokens.
    cpo = trainer.train_dataset
    assert sum(len(r["chosen_input_ids"]) + len(r["rejected_input_ids"]) for r in cpo) / len(cpo) == \
        pytest.approx(held)


@pytest.mark.parametrize("loss", ["rft", "kto"])
def test_rft_and_kto_train_over_budgeted_steps_and_record_them(loss, tmp_path):
    actor = tiny()
    pairs = small_pairs(actor, 8)
    per_pair = pair_tokens(actor, pairs, loss)
    with Registry(tmp_path / "registry.db"):
        res = train_actor(actor, pairs, cfg(loss=loss, epochs=1.0, batch_size=2, lr=1e-3,
                                            batch_tokens=int(per_pair * 4.5)),
                          output_dir=tmp_path / loss)
    assert res["batch_size"] == 4 and res["steps"] == 2  # 8 pairs, 4 a step, one epoch
    assert res["start_lr"] == pytest.approx(1e-3 * math.sqrt(2))
    assert res["tokens_per_pair"] == pytest.approx(per_pair, abs=0.1)
    if loss == "rft":  # the chosen side alone: about half a preference pair
        assert per_pair < 0.6 * pair_tokens(actor, pairs, "simpo")


def test_a_step_holds_one_pair_at_least_the_data_at_most_and_splits_over_the_processes():
    assert pairs_in_budget(100, 350.0, 240) == 1
    assert pairs_in_budget(10_000_000, 350.0, 240) == 240
    assert pairs_in_budget(16_384, 350.0, 240) == 46
    assert pairs_in_budget(16_384, 350.0, 240, multiple=4) == 44
    assert pairs_in_budget(100, 350.0, 240, multiple=2) == 2


def test_a_budget_is_refused_with_grpo_or_out_of_range_before_any_run(tmp_path, lc):
    with pytest.raises(ConfigError, match="batch-tokens.*--loss simpo/dpo/kto/rft"):
        cfg(loss="grpo", batch_tokens=4096).check()
    with pytest.raises(ConfigError, match="batch-tokens"):
        cfg(loss="simpo", batch_tokens=10).check()
    db = tmp_path / "registry.db"
    for argv, why in ((("--loss", "grpo", "--actor-batch-tokens", "4096"), "does not apply to --loss grpo"),
                      (("--actor-batch-tokens", "8"), "must be in 64-10000000 tokens")):
        code, _, err = lc("pipeline", "--actor", "tiny", "--critic", "tiny", *argv, "--db", db)
        assert code == 2 and "Traceback" not in err and why in " ".join(err.split()), err
        assert "actor-batch-tokens" in err
    assert not db.exists() or Registry(db).list_runs() == []
