#!/bin/bash
# A netjam sweep as a Slurm job array: 8 shards, one core each. netjam
# sweep --shard auto reads SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT and
# SLURM_ARRAY_TASK_MIN. Each shard writes into its own folder; when all are
# done:  netjam merge results/shard-*
#
#   sbatch deploy/slurm-array.sh configs/sweep-cc-loss.yaml
#
#SBATCH --job-name=netjam-sweep
#SBATCH --array=0-7
#SBATCH --cpus-per-task=1
#SBATCH --mem=2G
#SBATCH --time=02:00:00
#SBATCH --output=results/slurm-%A_%a.out
set -euo pipefail
scenario=${1:?usage: sbatch deploy/slurm-array.sh SCENARIO.yaml}
mkdir -p results
exec netjam sweep "$scenario" --shard auto --out "results/shard-${SLURM_ARRAY_TASK_ID}" -q
