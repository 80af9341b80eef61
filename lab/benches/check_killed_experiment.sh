#!/bin/bash
# Does a stopped experiment leave an inference server behind? Starts a one-arm Bamboogle experiment whose two policies
# sample through llama-server (the real SmolLM2-135M), sends the experiment's process the signal $1 (TERM or KILL)
# once both servers run, and times until no llama-server, no sampler folder (/tmp/genenv-sampler-*) and no arm-seed
# process is left. Needs the venv of `bash .ci/install --test` (llama-server built) active.
#   bash lab/benches/check_killed_experiment.sh TERM; bash lab/benches/check_killed_experiment.sh KILL
set -u
sig=${1:?TERM or KILL}
exp=$(mktemp -d)
if pgrep -x llama-server >/dev/null || ls -d /tmp/genenv-sampler-* >/dev/null 2>&1; then
  echo "a llama-server or a sampler folder is there already: stop it first"; exit 2
fi
HF_HUB_OFFLINE=1 genenv-experiment benchmark=bamboogle "arms=[genenv]" "seeds=[0]" experiment_dir="$exp/exp" \
  iterations=2 agent.policy.sampler=llama-server env_policy.policy.sampler=llama-server > "$exp/out.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ "$(pgrep -x llama-server | wc -l)" -ge 2 ] && break; sleep 1; done
[ "$(pgrep -x llama-server | wc -l)" -ge 2 ] || { echo "the servers never started: $exp/out.log"; kill -9 $pid; exit 1; }
sleep 5
echo "running: servers $(pgrep -x llama-server | tr '\n' ' '); sampler folders $(ls -d /tmp/genenv-sampler-* | wc -l)"
t0=$(date +%s.%N)
kill -"$sig" $pid
for _ in $(seq 600); do
  pgrep -x llama-server >/dev/null || ls -d /tmp/genenv-sampler-* >/dev/null 2>&1 || pgrep -f spawn_main >/dev/null \
    || break
  sleep 0.2
done
t1=$(date +%s.%N)
wait $pid 2>/dev/null; rc=$?
left=$(pgrep -x llama-server | wc -l)
folders=$(ls -d /tmp/genenv-sampler-* 2>/dev/null | wc -l)
if [ "$left" -eq 0 ] && [ "$folders" -eq 0 ]; then
  echo "SIG$sig: experiment exit $rc; servers, sampler folders and the arm-seed gone after $(echo "$t1 - $t0" | bc) s"
else
  echo "SIG$sig: experiment exit $rc; after $(echo "$t1 - $t0" | bc) s $left llama-servers and $folders sampler folders" \
    "are left (stop them: pkill -x llama-server)"
fi
rm -rf "$exp"
[ "$left" -eq 0 ] && [ "$folders" -eq 0 ]
