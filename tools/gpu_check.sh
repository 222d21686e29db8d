#!/usr/bin/env bash
# The GPU check (tools/gpu_check.py), for a GPU machine with the working tree and no Hub.
#
#   tools/gpu_check.sh prepare   # here, once: the wheels and the model config to carry
#   tools/gpu_check.sh run       # there: install the carried wheels, run the check (< 10 min)
#
# With the session's device tool: run(command="bash tools/gpu_check.sh run",
# carry=[".whl", ".gpu_check"], timeout_s=600). The report lands in $OUT (or out/gpu_check/):
# report.md fills the README's GPU column, report.json holds every figure.
set -euo pipefail
cd "$(dirname "$0")/.."

prepare() {
  local python=${PYTHON:-.venv/bin/python}
  mkdir -p .whl .gpu_check/smollm2
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
  grep -qx '/.gpu_check/' .git/info/exclude 2>/dev/null || echo '/.gpu_check/' >> .git/info/exclude
  # the model's shape and tokenizer (no weights): the check builds the architecture from them
  # when the offline model package is not installed there
  "$python" - <<'PY'
import shutil
from pathlib import Path
from grpo_core.models import ensure_offline_model
folder = Path(ensure_offline_model())
for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json", "chat_template.jinja"):
    if (folder / name).exists():
        shutil.copy(folder / name, Path(".gpu_check/smollm2") / name)
print("copied the model's config and tokenizer from", folder)
PY
  # what the machine's image lacks or has too old (its package list: the device tool's KINDS.md;
  # its transformers 5.17 is below the course's bound, and 5.25 needs huggingface_hub 2), for
  # Python 3.12, at the versions this venv tests with
  local pins
  pins=$("$python" -c 'from importlib.metadata import version
names = ("trl datasets dill multiprocess transformers huggingface_hub kernels httpx2 httpcore2 "
         "truststore tomlkit hf-xet click accelerate peft").split()
print(" ".join(f"{n}=={version(n)}" for n in names))')
  # shellcheck disable=SC2086
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl $pins
  du -sh .whl .gpu_check
}

run() {
  if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD"
  else
    export PYTHONPATH="$PWD"
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
    timeout 540 python3 tools/gpu_check.py --out "${OUT:-out/gpu_check}" "$@"
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; run "$@" ;;
  *) echo "usage: tools/gpu_check.sh prepare | run [gpu_check.py options]" >&2; exit 2 ;;
esac
