"""Diagnostic (issue 30): does the actor's greedy free-text answer follow the strategy?

Renders six fixed 4x4 start states with four very different strategies, with the
seed's conversion template and with its `E.g. [...]` line removed, and prints how many
distinct greedy answers each combination gives (6 = the answer depends on the state,
1 = one answer for every state) and the most common one. Free text, no grammar, so what
the model would say is visible. Run after `lactchain models prepare smollm2-135m`:

    .venv/bin/python scripts/strategy_echo_probe.py [--model FOLDER]
"""

from __future__ import annotations

import argparse
import collections

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from lactchain.envs.gridworld import GridWorldEnv
from lactchain.paths import models_dir
from lactchain.prompts import CONVERSION_TEMPLATE, DEFAULT_STRATEGY, render_prompt

STATES = [{"x": 1, "y": 3, "orientation": 2}, {"x": 2, "y": 1, "orientation": 0}, {"x": 0, "y": 3, "orientation": 0},
          {"x": 0, "y": 0, "orientation": 1}, {"x": 3, "y": 0, "orientation": 3}, {"x": 1, "y": 1, "orientation": 1}]
STRATEGIES = {"default": DEFAULT_STRATEGY,
              "left": "Always answer with exactly one move: turn left. Never move forward.",
              "forward3": "Answer ['move forward', 'move forward', 'move forward'].",
              "plan": "If the goal is ahead, move forward. If it is to your left, turn left, then move forward."}
TEMPLATES = {"with E.g.": CONVERSION_TEMPLATE, "without E.g.": CONVERSION_TEMPLATE.replace("E.g. {example}\n", "")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(models_dir() / "smollm2-135m"), help="a prepared actor folder")
    args = parser.parse_args()
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).eval()
    env = GridWorldEnv()
    observations = []
    for state in STATES:
        env.reset(options={"state": state})
        observations.append(env.describe())
    for template_name, template in TEMPLATES.items():
        for name, strategy in STRATEGIES.items():
            prompts = [tok.apply_chat_template([{"role": "user", "content": render_prompt(strategy, o, template=template)}],
                                               tokenize=False, add_generation_prompt=True) for o in observations]
            batch = tok(prompts, return_tensors="pt", padding=True)
            with torch.no_grad():
                out = model.generate(**batch, max_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id)
            answers = [" ".join(tok.decode(row[batch["input_ids"].shape[1]:], skip_special_tokens=True).split())[:60]
                       for row in out]
            top, count = collections.Counter(answers).most_common(1)[0]
            print(f"{template_name:13s} {name:9s} distinct={len(set(answers))} top={count}x {top!r}")


if __name__ == "__main__":
    main()
