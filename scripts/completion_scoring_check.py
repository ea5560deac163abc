"""Seconds per train-actor step with and without one of the trainers' savings, side by
side, alternating, same seed and pairs.

    python scripts/completion_scoring_check.py --actor smollm2-135m --loss dpo --threads 2
    python scripts/completion_scoring_check.py --actor smollm2-135m --loss simpo --threads 2
    python scripts/completion_scoring_check.py --saving shared-prefix --loss dpo --threads 2

`--saving completion` (the default): scoring every position vs the completion's only
(lactchain.train.completion_scoring) -- dpo / kto: TRL's fused LM head with and without
compaction on the CPU; simpo: TRL's CPOTrainer against the completion-window one.
`--saving shared-prefix`: the batch's shared prompt prefix run once per forward or in
every row (lactchain.train.shared_prefix), with the completion-only scoring in both.
Prints one JSON object: seconds per step (setup included, over --steps steps) and the
final loss of each run (they must agree). Run it alone: it times the machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time


def grid_pairs(actor, states: int) -> list[dict]:  # noqa: ANN001
    from lactchain.envs.gridworld import GridWorldEnv
    from lactchain.prompts import PromptSpec

    env = GridWorldEnv(moves=actor.moves)
    prompt = PromptSpec.for_env(env, moves=actor.moves)
    pairs = []
    for s in list(env.start_states())[:states]:
        text = prompt.render(env.describe(s))
        pairs += [{"prompt": text, "chosen": ["move forward", "turn left"], "rejected": [r]}
                  for r in ("turn left", "move forward")]
    return pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actor", default="smollm2-135m")
    ap.add_argument("--loss", default="dpo", choices=("dpo", "kto", "simpo"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--saving", default="completion", choices=("completion", "shared-prefix"))
    args = ap.parse_args()

    import torch
    import trl.trainer.utils as trl_utils
    from trl.experimental.cpo import CPOTrainer

    import lactchain.train.actor as train
    from lactchain.models.actor import Actor
    from lactchain.train.actor_config import TrainActorConfig
    from lactchain.train.completion_scoring import score_labelled_positions_only

    torch.set_num_threads(args.threads)
    every = trl_utils._use_triton  # TRL's own rule (nothing patched yet): every position off Triton devices
    score_labelled_positions_only()
    compact, window, patch = trl_utils._use_triton, train.completion_window_cpo, train.score_labelled_positions_only
    share = train.share_prompt_prefix
    modes = ("every", "completion") if args.saving == "completion" else ("every row", "shared prefix")

    def use(mode: str) -> None:  # build_trainer must not patch TRL back while "every" is timed
        ours = mode == "completion" or args.saving == "shared-prefix"
        trl_utils._use_triton = compact if ours else every
        train.score_labelled_positions_only = patch if ours else (lambda: False)
        train.completion_window_cpo = window if ours else (lambda: CPOTrainer)
        train.share_prompt_prefix = share if mode == "shared prefix" else (lambda model: False)

    settings = {"loss": args.loss, "lr": 1e-3, "max_steps": args.steps, "save_steps": 10_000, "bf16": False}
    if args.loss == "simpo":
        settings["cpo_alpha"] = 1.0
    out: dict[str, dict[str, list]] = {}
    for mode in modes * args.rounds:
        use(mode)
        torch.manual_seed(0)
        actor = Actor.load(args.actor)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            res = train.train_actor(actor, grid_pairs(actor, 24), TrainActorConfig.from_params(settings),
                                    output_dir=folder)
        row = out.setdefault(mode, {"s_per_step": [], "loss": []})
        row["s_per_step"].append(round((time.perf_counter() - t0) / args.steps, 3))
        row["loss"].append(res.get("final_metrics", {}).get("loss"))
    use(modes[1])
    print(json.dumps({"actor": args.actor, "loss": args.loss, "threads": args.threads, "saving": args.saving,
                      "positions": out}))


if __name__ == "__main__":
    main()
