"""The trainers' config dataclasses (lactchain.config.Config): the same option names,
flags and defaults as the commands they back (`train-actor`, `train-critic`,
`dt train`, `collect-pairs`), the same recorded params, and one-line refusals of
settings a loss does not read (no silently dropped arguments)."""

from __future__ import annotations

import pytest

from lactchain.config import ConfigError, default_of, flag_of, flat_fields
from lactchain.archive.dt.train_config import DTTrainConfig
from lactchain.loop.preferences import CollectConfig, DrawConfig
from lactchain.train.actor_config import GRPO_PLAIN, LOSS_SETTINGS, LOSSES, TrainActorConfig, TrainActorJobConfig
from lactchain.train.critic_config import TrainCriticConfig


def cli_options(cls: type) -> dict[str, tuple[str, object]]:
    """field -> (flag, default) of the fields a generated command shows."""
    return {f.name: (flag_of(f), default_of(f)) for _, f in flat_fields(cls) if f.metadata.get("cli", True)}


# What the commands take today (lactchain/cli/*_cmd.py): option name -> (flag, default).
TRAIN_ACTOR = {
    "loss": ("--loss", "simpo"), "pairs_from": ("--pairs-from", []), "labeler": ("--labeler", "any"),
    "actor": ("--actor", "smollm2-135m"), "adapter": ("--adapter", None), "epochs": ("--epochs", 1.0),
    "max_steps": ("--max-steps", None), "lr": ("--lr", 5e-5), "batch_size": ("--batch-size", 8),
    "batch_tokens": ("--batch-tokens", None),
    "beta": ("--beta", None), "simpo_gamma": ("--simpo-gamma", None), "cpo_alpha": ("--cpo-alpha", None),
    "rpo_alpha": ("--rpo-alpha", None), "dpo_loss": ("--dpo-loss", "sigmoid"), "kto_balance": ("--kto-balance", True),
    "kl_beta": ("--kl-beta", 0.0), "scale_rewards": ("--scale-rewards", "group"),
    "states_per_step": ("--states-per-step", 8), "grpo_loss_type": ("--grpo-loss-type", "dapo"),
    "epsilon_high": ("--epsilon-high", 0.28), "group_filter": ("--group-filter", 2),
    "tokens_per_pass": ("--tokens-per-pass", None), "policy_logprobs": ("--policy-logprobs", None),
    "updates_per_generation": ("--updates-per-generation", 1), "entropy_coef": ("--entropy-coef", None),
    "entropy_target": ("--entropy-target", None), "greedy_member": ("--greedy-member", False),
    "replay_best": ("--replay-best", None),
    "lora_r": ("--lora-r", 8), "lora_alpha": ("--lora-alpha", 16), "save_steps": ("--save-steps", 25),
    "resume": ("--resume-from", None), "seed": ("--seed", 0),
    "rollouts_from": ("--rollouts-from", []), "grpo_reward": ("--grpo-reward", "return"),
    "processes": ("--processes", 1), "dtype": ("--dtype", None),
}
TRAIN_CRITIC = {
    "episodes_from": ("--episodes-from", []), "critic": ("--critic", "minilm-l6"), "epochs": ("--epochs", 5),
    "gamma": ("--gamma", 0.9), "lr": ("--lr", 5e-4), "batch_size": ("--batch-size", 64), "seed": ("--seed", 0),
    "lora_r": ("--lora-r", 8), "q_weight": ("--q-weight", 1.0), "resume_from": ("--resume-from", None),
    "env": ("--env", "grid"), "scene": ("--scene", None), "state_text": ("--state-text", "egocentric"),
    "processes": ("--processes", 1),
}
DT_TRAIN = {
    "archive": ("--archive", ""), "describer": ("--describer", "rule"), "text_encoder": ("--text-encoder", "learned"),
    "no_text": ("--no-text", False), "n_layer": ("--n-layer", 2), "n_head": ("--n-head", 4), "n_embd": ("--n-embd", 128),
    "dropout": ("--dropout", 0.1), "steps": ("--steps", 3000), "minutes": ("--minutes", None),
    "batch_size": ("--batch-size", 32), "lr": ("--lr", 1e-3), "val_fraction": ("--val-fraction", 0.1),
    "select_fraction": ("--select-fraction", 0.1), "select_every": ("--select-every", 250), "seed": ("--seed", 0),
    "text_dropout": ("--text-dropout", 0.2), "bd_dropout": ("--bd-dropout", 0.7), "relabel": ("--relabel", 0.5),
    "max_visits": ("--max-visits", 6), "rtg": ("--rtg", False), "bd_to_go": ("--bd-to-go", True),
    "tie_actions": ("--tie-actions", False), "absolute_cells": ("--cells", True), "eval_every": ("--eval-every", 100),
    "checkpoint_every": ("--checkpoint-every", 500), "threads": ("--threads", None),
    "resume_from": ("--resume-from", None),
}
COLLECT = {  # the sampling part of `collect-pairs`
    "samples": ("--samples", 4), "temperature": ("--temperature", 1.0), "constrained": ("--constrained", True),
    "seed": ("--seed", 0), "env": ("--env", "grid"), "deals": ("--deals", 16), "gamma": ("--gamma", None),
    "margin": ("--margin", 0.5),
}


@pytest.mark.parametrize("cls, expected", [(TrainActorJobConfig, TRAIN_ACTOR), (TrainCriticConfig, TRAIN_CRITIC),
                                           (DTTrainConfig, DT_TRAIN), (CollectConfig, COLLECT)])
def test_config_options_are_the_commands_options(cls, expected):
    assert cli_options(cls) == expected


def test_train_actor_params_are_the_commands_params():
    """What `train-actor` records (its params dict) reads back into the job config and out again."""
    recorded = dict(loss="dpo", pairs_from=["r1"], labeler="critic", actor="tiny", adapter=None, epochs=2.0,
                    max_steps=None, lr=1e-4, batch_size=4, batch_tokens=None, beta=0.2, simpo_gamma=None, cpo_alpha=None, lora_r=4,
                    lora_alpha=8, save_steps=10, resume=None, seed=3, rollouts_from=[], grpo_reward="return",
                    processes=1, rpo_alpha=0.0, dpo_loss="sigmoid", kto_balance=True, kl_beta=0.0,
                    scale_rewards="group", states_per_step=8, grpo_loss_type="dapo", epsilon_high=0.28,
                    group_filter=2, tokens_per_pass=None, policy_logprobs=None, updates_per_generation=1,
                    entropy_coef=None, entropy_target=None, greedy_member=False, replay_best=None, dtype=None)
    config = TrainActorJobConfig.from_params(recorded)
    params = config.to_params()
    assert {k: params[k] for k in recorded} == recorded
    assert set(params) - set(recorded) == {f.name for _, f in flat_fields(TrainActorConfig)
                                           if not f.metadata.get("cli", True)}
    assert TrainActorJobConfig.from_params(params) == config
    assert config.beta == 0.2 and config.trainer().preference.beta == 0.2
    older = TrainActorJobConfig.from_params({**recorded, "cpo_alpha": 0.0})  # "off" as older runs recorded it
    assert older.simpo.cpo_alpha is None and older.cpo_alpha == 0.0
    before_entropy = {k: v for k, v in recorded.items()  # runs of 2026-11-29 and before
                      if not k.startswith("entropy_") and k not in ("greedy_member", "replay_best", "batch_tokens", "dtype")}
    assert TrainActorJobConfig.from_params(before_entropy) == config
    # runs of 2026-11-30 and before wrote GRPO's "off" for a loss that does not read it
    assert TrainActorJobConfig.from_params({**recorded, **GRPO_PLAIN}) == config
    assert isinstance(config.trainer(), TrainActorConfig) and not isinstance(config.trainer(), TrainActorJobConfig)


@pytest.mark.parametrize("loss", LOSSES)
def test_every_loss_works_with_the_defaults(loss):
    config = TrainActorConfig(loss=loss)
    assert set(LOSS_SETTINGS[loss]) <= {f.name for _, f in flat_fields(TrainActorConfig)}
    assert config.hparams()[0] == {"simpo": 2.5, "dpo": 0.1, "kto": 0.1, "rft": 0.0, "grpo": 0.0}[loss]


@pytest.mark.parametrize("loss, setting, value, flag", [
    ("dpo", "cpo_alpha", 0.5, "--cpo-alpha"),
    ("kto", "simpo_gamma", 0.05, "--simpo-gamma"),
    ("rft", "beta", 2.5, "--beta"),
    ("rft", "cpo_alpha", 0.1, "--cpo-alpha"),
    ("rft", "save_steps", 10, "--save-steps"),
    ("rft", "bf16", True, "--bf16"),
    ("rft", "grad_accum", 4, "--grad-accum"),
    ("rft", "max_length", 256, "--max-length"),
    ("grpo", "cpo_alpha", 0.5, "--cpo-alpha"),
    ("simpo", "kl_beta", 0.1, "--kl-beta"),
])
def test_a_setting_the_loss_does_not_read_is_refused_in_one_line(loss, setting, value, flag):
    with pytest.raises(ConfigError) as err:
        TrainActorConfig.from_params({"loss": loss, setting: value})
    message = str(err.value)
    assert message.startswith(f"{flag} ") and "only applies to --loss" in message and "\n" not in message


def test_rft_reads_the_lora_and_step_settings():
    config = TrainActorConfig.from_params(dict(loss="rft", max_steps=3, lr=1e-3, batch_size=2, lora_r=4,
                                               lora_dropout=0.1, target_modules=["q_proj"], seed=1))
    assert config.max_steps == 3 and config.target_modules == ["q_proj"]
    with pytest.raises(ConfigError, match="rft runs are short"):
        TrainActorJobConfig(loss="rft", resume="some-run")


def test_simpo_values_of_the_first_attempt_and_bad_numbers_are_refused():
    with pytest.raises(ConfigError, match="first LactChain attempt"):
        TrainActorConfig.from_params(dict(loss="simpo", beta=0.1, simpo_gamma=0.5))
    for bad in (dict(lr=0.0), dict(epochs=-1.0), dict(batch_size=0), dict(lora_r=2000), dict(loss="ppo"),
                dict(cpo_alpha=-0.1), dict(lr=float("nan"))):
        with pytest.raises(ConfigError):
            TrainActorConfig.from_params(bad)
    with pytest.raises(ConfigError, match="--labeler"):
        TrainActorJobConfig(labeler="oracle")


def test_critic_config_checks_and_round_trip():
    config = TrainCriticConfig(episodes_from=["p1"], env="LactChain/GridWorld-v0")
    assert config.env == "grid"
    assert TrainCriticConfig.from_params(config.to_params()) == config
    with pytest.raises(ConfigError, match="--episodes-from"):
        TrainCriticConfig()
    with pytest.raises(ConfigError, match="--batch-size"):
        TrainCriticConfig(episodes_from=["p1"], batch_size=1)
    with pytest.raises(ConfigError, match="unknown setting"):
        TrainCriticConfig.from_params({"episodes_from": ["p1"], "epoch": 3})


def test_dt_config_checks():
    assert DTTrainConfig(archive="a", no_text=True).text_encoder == "none"
    with pytest.raises(ConfigError, match="--no-text"):
        DTTrainConfig(archive="a", no_text=True, text_encoder="minilm-l6")
    with pytest.raises(ConfigError, match="multiple of --n-head"):
        DTTrainConfig(archive="a", n_embd=130, n_head=4)
    with pytest.raises(ConfigError, match="--archive"):
        DTTrainConfig()
    with pytest.raises(ConfigError, match="--minutes"):
        DTTrainConfig(archive="a", minutes=0.0)


def test_sampling_configs():
    assert DrawConfig(samples=1, include_greedy=True, seed=7919 * 2**32).samples == 1  # the pipeline's draws
    with pytest.raises(ConfigError, match="at least 2"):
        CollectConfig(samples=1)
    with pytest.raises(ConfigError, match="--temperature"):
        CollectConfig(temperature=0.2)
    with pytest.raises(ConfigError, match="--env"):
        DrawConfig(env="nowhere")


def test_a_string_of_extra_options_reads_as_the_commands_options():
    """`argv_values`: what `bench dt --train-args "..."` hands each `dt train` -- values by
    field, switches both ways, `--flag=value` -- and one line for what the command lacks."""
    from lactchain.config import argv_values

    values = argv_values(DTTrainConfig, ["--n-layer", "1", "--n-embd=32", "--rtg", "--bd-static", "--no-cells", "-b", "8"])
    assert values == {"n_layer": "1", "n_embd": "32", "rtg": True, "bd_to_go": False, "absolute_cells": False,
                      "batch_size": "8"}
    config = DTTrainConfig.from_params({**values, "archive": "a"})
    assert (config.n_layer, config.n_embd, config.batch_size, config.rtg) == (1, 32, 8, True)
    for argv, message in ((["--bogus"], "--bogus: no such option"), (["--n-layer"], "--n-layer needs a value"),
                          (["--rtg=1"], "--rtg is a switch")):
        with pytest.raises(ConfigError, match=message):
            argv_values(DTTrainConfig, argv)


def test_every_trainer_setting_is_read_by_some_loss():
    """A setting no loss reads would be refused whatever the loss (`bench device`'s
    whole-row train step, shared_prefix=False, was refused so on its first GPU run)."""
    read = {name for names in LOSS_SETTINGS.values() for name in names}
    assert {f.name for _, f in flat_fields(TrainActorConfig)} - {"loss"} <= read
    for loss in ("simpo", "dpo", "kto", "grpo", "rft"):  # whole rows: a GPU's default, any loss
        TrainActorConfig(loss=loss, shared_prefix=False).check()
    with pytest.raises(ConfigError, match="only applies to --loss simpo/dpo/kto"):
        TrainActorConfig(loss="rft", max_length=256).check()
