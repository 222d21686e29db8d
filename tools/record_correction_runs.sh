#!/usr/bin/env bash
# Record notebook 13's comparison: experiment 1 (length reward, 30 steps) in the bfloat16 plan,
# whose rollouts come from a packed bfloat16 copy, with TRL's default sampling correction
# (sequence_mask, cap 3) and without it ("measure": the same mismatch metrics, no weights),
# seeds 0-3 each, every run by one commit.
#
# Usage: tools/record_correction_runs.sh [SEED ...]   (default: 0 1 2 3)
# Runs in a git worktree of HEAD (.record/<commit>, git ignores it), which must be committed,
# so that every config.json names the commit that made it; the finished runs are copied into
# data/runs/ (without checkpoints). One heavy job at a time: start it alone, in the background:
#   nohup tools/record_correction_runs.sh > /tmp/correction_runs.log 2>&1 &
# The bfloat16 plan draws other completions on another CPU: record all eight on one machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
commit=$(git -C "$root" rev-parse HEAD)
tree=$root/.record/$commit
[ -d "$tree/grpo_core" ] || git -C "$root" worktree add --detach "$tree" "$commit"
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2 3)
for seed in "${seeds[@]}"; do
  for arm in plain corrected; do
    name=exp1-sampler-$arm-seed$seed-cpu
    mode=measure
    [ "$arm" = corrected ] && mode=sequence_mask
    echo "$(date +%T) $name: --sampling-correction $mode at ${commit:0:7}"
    started=$SECONDS
    (cd "$tree" && HF_HUB_OFFLINE=1 PYTHONPATH="$tree" "$python" -m grpo_core length \
        --profile cpu --steps 30 --no-checkpoint --precision bfloat16 \
        --sampling-correction "$mode" --seed "$seed" --quiet --out "data/runs/$name")
    echo "$(date +%T) $name: done in $((SECONDS - started)) s"
    rm -rf "$root/data/runs/$name"
    cp -r "$tree/data/runs/$name" "$root/data/runs/$name"
  done
done
