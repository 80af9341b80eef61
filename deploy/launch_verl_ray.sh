#!/usr/bin/env bash
# Launch `genenv-train engine=verl_ray` on GPU machines (docs/distributed.md). NOT run in this project's CI (no GPU).
#
#   deploy/launch_verl_ray.sh single BENCHMARK MODEL_DIR [OVERRIDES...]
#       one node with 8 GPUs: agent pool 4 GPUs, env-policy pool 4 GPUs; Ray starts inside the job.
#   deploy/launch_verl_ray.sh head                      # on the head node: start the Ray head
#   deploy/launch_verl_ray.sh worker HEAD_IP            # on every other node: join the cluster
#   deploy/launch_verl_ray.sh submit HEAD_IP BENCHMARK MODEL_DIR AGENT_NODES ENV_NODES [OVERRIDES...]
#       submit the run as a Ray job: the agent gets AGENT_NODES whole nodes, the env policy ENV_NODES
#       (GPUS_PER_NODE each, default 8).
#
# Environment: RUN_DIR (default runs/<benchmark>-verl), GPUS_PER_NODE (8), RAY_PORT (6379), DASHBOARD_PORT (8265),
# GENENV_DATA_DIR (the benchmark data, same path on every node), DRY_RUN=1 (print the command instead of running it).
# MODEL_DIR and RUN_DIR must be visible at the same path on every node (shared filesystem): workers load the model
# from it and write checkpoint shards into RUN_DIR. Relative RUN_DIR, GENENV_DATA_DIR and MODEL_DIR (an existing
# folder) are made absolute from the directory the script runs in (symlinks kept), since a submitted job runs in
# the Ray head's working directory.
# Example (the paper's settings, Qwen2.5-7B-Instruct for both policies, one 8-GPU node):
#   deploy/launch_verl_ray.sh single bfcl /models/Qwen2.5-7B-Instruct
set -euo pipefail

RAY_PORT="${RAY_PORT:-6379}"
DASHBOARD_PORT="${DASHBOARD_PORT:-8265}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"

usage() { sed -n '2,19p' "$0"; exit 2; }

absolute() {  # PATH -> PATH made absolute from the current directory ($PWD, as the user typed it), normalised
  case "$1" in /*) set -- "$1" ;; *) set -- "${PWD}/$1" ;; esac  # without resolving symlinks
  realpath -m -s -- "$1"
}

run() {  # exec the command, or print it (shell-quoted) with DRY_RUN=1
  if [ -n "${DRY_RUN:-}" ]; then printf '%q ' "$@"; echo; else exec "$@"; fi
}

train_args() {  # BENCHMARK MODEL_DIR -> the genenv-train arguments shared by all modes
  local benchmark="$1" model="$2"
  if [ -d "${model}" ]; then model="$(absolute "${model}")"; fi  # a folder; a hub id or alias stays as it is
  echo "benchmark=${benchmark} engine=verl_ray profile=paper" \
       "agent.policy.model=${model} env_policy.policy.model=${model}" \
       "run_dir=$(absolute "${RUN_DIR:-runs/${benchmark}-verl}")"
}

mode="${1:-}"; shift || true
case "${mode}" in
  single)
    [ $# -ge 2 ] || usage
    benchmark="$1"; model="$2"; shift 2
    half=$((GPUS_PER_NODE / 2))
    # shellcheck disable=SC2046
    run genenv-train $(train_args "${benchmark}" "${model}") \
      "verl_ray.pools.agent.n_gpus_per_node=${half}" "verl_ray.pools.env_policy.n_gpus_per_node=${half}" "$@"
    ;;
  head)
    run ray start --head --port="${RAY_PORT}" --dashboard-host=0.0.0.0 --dashboard-port="${DASHBOARD_PORT}" \
      --num-gpus="${GPUS_PER_NODE}"
    ;;
  worker)
    [ $# -ge 1 ] || usage
    run ray start --address="$1:${RAY_PORT}" --num-gpus="${GPUS_PER_NODE}"
    ;;
  submit)
    [ $# -ge 5 ] || usage
    head="$1"; benchmark="$2"; model="$3"; agent_nodes="$4"; env_nodes="$5"; shift 5
    data_dir="${GENENV_DATA_DIR:-}"
    if [ -n "${data_dir}" ]; then data_dir="$(absolute "${data_dir}")"; fi
    env_json=$(printf '{"env_vars": {"GENENV_DATA_DIR": "%s", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "true"}}' \
      "${data_dir}")
    # shellcheck disable=SC2046
    run ray job submit --address="http://${head}:${DASHBOARD_PORT}" --runtime-env-json="${env_json}" -- \
      genenv-train $(train_args "${benchmark}" "${model}") \
      "verl_ray.pools.agent.nnodes=${agent_nodes}" "verl_ray.pools.agent.n_gpus_per_node=${GPUS_PER_NODE}" \
      "verl_ray.pools.env_policy.nnodes=${env_nodes}" "verl_ray.pools.env_policy.n_gpus_per_node=${GPUS_PER_NODE}" \
      "$@"
    ;;
  *) usage ;;
esac
