#!/usr/bin/env bash
# Times the README's main command as a new user meets it: a fresh clone of this repository, a new venv, an empty pip
# cache and an empty GENENV_CACHE (so the GGUF is converted and every package but the machine's local torch wheel is
# downloaded). Prints one line per step in seconds, the sum of install, evaluate and train, and the venv's size.
# Nothing of the user's caches is touched: both caches are folders under the scratch directory, removed at the end.
#   bash lab/benches/bench_first_install.sh        (from the repository root; about 5-10 min on 2 cores)
# The figures are quoted in docs/install.md ("The README's main command ...").
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
git clone -q "$repo" "$scratch/clone"
cd "$scratch/clone"
export PIP_CACHE_DIR="$scratch/pip-cache" GENENV_CACHE="$scratch/genenv-cache" HF_HUB_OFFLINE=1
unset GENENV_DATA_DIR
step() {  # step NAME COMMAND...: runs COMMAND, prints NAME and its wall time; a failing step stops the bench
  local name="$1"; shift
  local t0; t0=$(date +%s.%N)
  if ! "$@" > "$scratch/$name.log" 2>&1; then
    echo "$name FAILED (last lines below)"; tail -20 "$scratch/$name.log"; exit 1
  fi
  printf '%-10s %7.1f s\n' "$name" "$(echo "$(date +%s.%N) - $t0" | bc)"
}
step venv python3 -m venv .venv
. .venv/bin/activate
total0=$(date +%s.%N)
step install bash .ci/install
step evaluate genenv-eval --benchmarks bfcl,bamboogle --policy smollm2 --limit 20
step train genenv-train benchmark=bamboogle   # the run folder lands in the scratch clone's runs/
printf '%-10s %7.1f s\n' "in all" "$(echo "$(date +%s.%N) - $total0" | bc)"
printf 'venv size: %s\n' "$(du -sh .venv | cut -f1)"
# the host as the experiments record it: CPU model, torch's kernels, torch version
python -c 'from genenv.trainer.experiments.provenance import host; print("host:", host())'
