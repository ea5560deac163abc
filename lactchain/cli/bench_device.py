"""`lactchain bench device` (alias `bench gpu`): per phase seconds, tokens/s and
utilisation on this machine's GPU or CPU (`lactchain.bench.device`), as JSON."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Annotated, Optional

import typer

from lactchain.cli.common import JsonOption, check_models, console, err_console, fail, print_json
from lactchain.cli.play_cmd import ActorOption

ALL_PHASES = "evaluate,rollout,critic_encode,train_step,grpo_step"  # lactchain.bench.device.PHASES (no torch here)
CriticOption = Annotated[str, typer.Option("--critic", help="Critic backbone: a preset (minilm-l6, tiny) or a folder.")]


def bench_device(
    actor: ActorOption = "smollm2-135m",
    critic: CriticOption = "minilm-l6",
    device: Annotated[Optional[str], typer.Option("--device", help="cuda, cuda:1 or cpu. Default: cuda when "
                                                                   "there is one, else cpu.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Generation dtype: auto (bfloat16 where this machine does "
                                                       "it natively), bfloat16, float32.")] = "auto",
    envs: Annotated[int, typer.Option("--envs", "-b", min=1, max=4096, help="Envs in lock-step in the "
                                                                           "rollout phase.")] = 64,
    steps: Annotated[int, typer.Option("--steps", "-k", min=1, max=100, help="Lock-steps timed in the rollout "
                                                                             "phase.")] = 3,
    critic_texts: Annotated[int, typer.Option("--critic-texts", min=1, max=1_000_000,
                                              help="(state, move list) texts the critic scores.")] = 1024,
    train_steps: Annotated[int, typer.Option("--train-steps", min=2, max=1000,
                                             help="CPO-SimPO and GRPO steps (the first is not timed).")] = 4,
    phases: Annotated[str, typer.Option("--phases", help="Comma-separated, some of: "
                                                         f"{ALL_PHASES.replace(',', ', ')}.")] = ALL_PHASES,
    profile: Annotated[Optional[Path], typer.Option("--profile", help="Folder for a torch.profiler Chrome trace "
                                                                      "and an op table per phase.")] = None,
    save: Annotated[Optional[Path], typer.Option("--save", help="Also write the report to this folder as "
                                                                "device-<card>-<date>.json (e.g. docs/results/"
                                                                "engine).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Per phase of the loop (greedy evaluation of the 60 grid states, sampled rollouts,
    the critic's encoder, CPO-SimPO and GRPO steps): seconds, tokens/s and model-FLOPs utilisation
    against the card's bf16 peak and this machine's measured matmul rate; the greedy
    answers compared with xgrammar's processor and with the prefix cache flipped. Run it
    alone: it times the machine."""
    import torch

    from lactchain.bench.device import PHASES, DeviceBenchConfig, run_device_bench

    chosen = tuple(p.strip() for p in phases.split(",") if p.strip())
    unknown = [p for p in chosen if p not in PHASES]
    if not chosen or unknown:
        fail(f"--phases {phases!r}: use some of {', '.join(PHASES)}")
    check_models(actor, critic if "critic_encode" in chosen else None)
    if device is not None:
        try:
            dev = torch.device(device)
        except RuntimeError:
            fail(f"--device {device!r} is not a device: use cpu or cuda[:N]")
            return
        if dev.type not in ("cpu", "cuda"):
            fail(f"--device {device}: use cpu or cuda[:N]")
        if dev.type == "cuda" and not torch.cuda.is_available():
            fail(f"--device {device}: this machine has no CUDA GPU; use --device cpu")
    cfg = DeviceBenchConfig(actor=actor, critic=critic, device=device, dtype=dtype, envs=envs, steps=steps,
                            critic_texts=critic_texts, train_steps=train_steps,
                            profile=str(profile) if profile else None)
    try:
        with err_console.status(f"timing {', '.join(chosen)}"):
            report = run_device_bench(cfg, chosen)
    except ValueError as exc:
        fail(str(exc))
        return
    if save is not None:
        slug = re.sub(r"[^a-z0-9]+", "-", report["device"].lower()).strip("-") or "device"
        save.mkdir(parents=True, exist_ok=True)
        target = save / f"device-{slug}-{date.today().isoformat()}.json"
        target.write_text(json.dumps(report, indent=2) + "\n")
        report["saved"] = str(target)
    if as_json:
        print_json(report)
        return
    console.print(f"{report['device']} ({report['device_type']}, {report['dtype']}, "
                  f"{report['threads']} threads)", highlight=False)
    for name, row in report["phases"].items():
        util = row.get("utilisation_vs_spec") or row.get("utilisation_vs_matmul")
        seconds, unit = (row["s_per_step"], "s/step") if row.get("s_per_step") else (row["seconds"], "s")
        console.print(f"{name:14s} {seconds:8.3f} {unit:6s} {row.get('tokens_per_s') or 0:10.0f} tokens/s  "
                      f"utilisation {util or 0:.1%}", highlight=False)
    checks = {k: v for row in report["phases"].values() for k, v in row.items() if k.endswith("_identical")}
    if checks:
        console.print("same answers: " + ", ".join(f"{k.removesuffix('_identical')} {'yes' if v else 'NO'}"
                                                   for k, v in checks.items()), highlight=False)
