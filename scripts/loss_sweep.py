"""The per-loss defaults sweep: the loop at --explore 0 (the actor's own samples only) on
the tiny actor and critic, one cell per (setting, seed), appended as JSON lines; a
finished cell is skipped when the file is read again (resumable).

    python scripts/loss_sweep.py OUT.jsonl '[{"loss": "grpo", "actor_lr": 1e-4}, ...]' --seeds 0,1,2
    python scripts/loss_sweep.py OUT.jsonl --table     # the markdown table of what OUT holds

Each line: the cell's settings, seed, the success / top-answer-share curve (iteration 0
= before training) and seconds. LOOP_LR in lactchain/loop/pipeline.py cites the results kept
in docs/results/loss-defaults/.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("grid", nargs="?", help="JSON list of PipelineConfig settings, one dict per cell")
    ap.add_argument("--table", action="store_true", help="print the markdown table of OUT and exit")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--iterations", type=int, default=3)
    args = ap.parse_args()
    if args.table:
        print(table([json.loads(line) for line in args.out.read_text().splitlines()]))
        return
    if not args.grid:
        ap.error("give the grid (a JSON list of settings) or --table")

    import torch

    torch.set_num_threads(1)
    from lactchain.runs.lifecycle import run_context
    from lactchain.loop.config import PipelineConfig
    from lactchain.loop.pipeline import run_pipeline
    from lactchain.runs.registry import Registry

    done = set()
    if args.out.is_file():
        done = {json.dumps([r["kw"], r["seed"]], sort_keys=True) for r in map(json.loads, args.out.read_text().splitlines())}
    for kw in json.loads(args.grid):
        for seed in (int(s) for s in args.seeds.split(",")):
            key = json.dumps([kw, seed], sort_keys=True)
            if key in done:
                continue
            settings = dict(actor="tiny", critic="tiny", labeler="critic", explore=0, iterations=args.iterations,
                            td_lists_per_state=64, td_rounds=4, seed=seed)
            settings.update(kw)
            t0 = time.time()
            cfg = PipelineConfig.from_params(settings)  # flat settings, as on the CLI
            with tempfile.TemporaryDirectory() as d, Registry(f"{d}/registry.db") as reg:
                with run_context(reg, "pipeline", name="loss sweep", params=cfg.params(), quiet=True) as h:
                    out = run_pipeline(h, cfg)
            curve = [[round(r["success_rate"], 3), round(r.get("top_answer_share") or 0.0, 3)] for r in out["curve"]]
            rec = {"kw": kw, "seed": seed, "actor_lr": cfg.actor_lr, "curve": curve, "s": round(time.time() - t0, 1)}
            with args.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


def table(rows: list[dict]) -> str:
    """One line per setting: success before -> each iteration per seed, the best gain and
    the worst top-answer share over the trained iterations."""
    out = ["| settings | seed | success: before -> iterations | best gain | worst top share (trained) |",
           "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["kw"]["loss"], r["actor_lr"], json.dumps(r["kw"], sort_keys=True), r["seed"])):
        succ = [c[0] for c in r["curve"]]
        shares = [c[1] for c in r["curve"][1:]]
        kw = ", ".join(f"{k}={v}" for k, v in r["kw"].items())
        out.append(f"| {kw} | {r['seed']} | {' -> '.join(f'{x:.2f}' for x in succ)} | "
                   f"{max(succ[1:]) - succ[0]:+.2f} | {max(shares):.2f} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
