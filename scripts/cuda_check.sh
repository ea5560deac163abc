#!/usr/bin/env bash
# The CUDA check on a lent GPU machine with no network (its image has torch, transformers,
# peft, accelerate, typer, rich; not the rest). Here first, from the repo root:
#   echo /.whl/ >> .git/info/exclude; mkdir -p .whl
#   for n in trl datasets dill multiprocess sqlite-utils sqlite-fts4 click-default-group gymnasium \
#            farama-notifications gguf textual mdit-py-plugins platformdirs textual-plotext plotext xgrammar \
#            apache-tvm-ffi pydantic pydantic-core annotated-types typing-inspection pytest-asyncio \
#            pytest-textual-snapshot syrupy linkify-it-py; do
#     echo "$n==$(.venv/bin/pip show $n | awk '/^Version:/{print $2}')"; done > /tmp/pins
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl -r /tmp/pins          # about 12 MB
# Then on the machine (carry .whl): bash scripts/cuda_check.sh   (about 8 minutes on an H100 box)
# The default models' wheels are too big to carry, so the e2e tests and `models` tests are left out.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/cuda-check}; mkdir -p "$OUT"
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || echo "editable install failed (see install.log): console-script tests will fail"
nvidia-smi -L
python3 - <<'PY' | tee "$OUT/versions.txt"
import sys, torch, transformers, peft, trl, textual, gymnasium
print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__,
      "trl", trl.__version__, "textual", textual.__version__, "gymnasium", gymnasium.__version__,
      "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
PY
export LACTCHAIN_RUNS=/tmp/runs LACTCHAIN_DB=/tmp/runs/registry.db
mkdir -p /tmp/runs
# 1. The CLI on CUDA, tiny models: a strategy search (grid, Blackjack), its bench, a flat evaluation.
( set -x
timeout 90 python3 -m lactchain.cli strategy search --actor tiny --train-states 8 --heldout-states 12 --rounds 2 --json
timeout 90 python3 -m lactchain.cli strategy search --actor tiny --env blackjack --proposers demos --train-states 8 \
  --heldout-states 12 --rounds 2 --json
timeout 90 python3 -m lactchain.cli bench strategy --actor tiny --seeds 0 --rounds 2 --train-states 8 --heldout-states 12 \
  --budget-min 0.2 --json
timeout 60 python3 -m lactchain.cli evaluate --actor tiny --scene flat --max-actions 10 --states 8 --json
) > "$OUT/cli.log" 2>&1
echo "cli rc=$? at $(( $(date +%s) - T0 )) s"
# 2. The suite without the e2e tests: ~260 s on 14 workers; failures' short tracebacks at the end.
timeout 360 python3 -m pytest -v -m "not e2e" -n 14 --dist loadgroup --timeout 90 -p no:benchmark -p no:cacheprovider \
  --tb=short -rfE --junitxml="$OUT/junit.xml" > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? at $(( $(date +%s) - T0 )) s"
grep -E "^(FAILED|ERROR) |[0-9]+ (passed|failed)" "$OUT/pytest.log" | tail -40
