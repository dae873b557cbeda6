#!/bin/bash
# A netjam sweep as a Slurm job array: 8 shards, one core each. A task runs
# the shard of the sweep that is its array index (netjam sweep --shard auto
# reads SLURM_ARRAY_TASK_ID), out of NETJAM_SHARDS shards, fixed for the
# sweep: a task submitted again runs the same shard into the same folder,
# results/shard-INDEX. Submit from a folder every node sees; each task's
# output is slurm-JOB_INDEX.out there.
#
#   sbatch deploy/slurm-array.sh configs/sweep-cc-loss.yaml          # shards 0 to 7
#   sbatch --array=5 deploy/slurm-array.sh configs/sweep-cc-loss.yaml  # shard 5 again
#   NETJAM_SHARDS=4 sbatch --array=0-3 deploy/slurm-array.sh my.yaml  # 4 shards
#   netjam merge results/shard-* --out results/merged
#
# Arguments after the scenario go to netjam sweep (--grid, --seeds, --set).
#SBATCH --job-name=netjam-sweep
#SBATCH --array=0-7
#SBATCH --cpus-per-task=1
#SBATCH --mem=2G
#SBATCH --time=02:00:00
#SBATCH --output=slurm-%A_%a.out
set -euo pipefail
: "${1:?usage: [NETJAM_SHARDS=N] sbatch [--array=INDEXES] deploy/slurm-array.sh SCENARIO.yaml [netjam sweep flags]}"
# The sweep's number of shards: the array's indexes are 0 to NETJAM_SHARDS-1.
export NETJAM_SHARDS=${NETJAM_SHARDS:-8}
exec netjam sweep "$@" --shard auto --out "results/shard-${SLURM_ARRAY_TASK_ID}" -q
