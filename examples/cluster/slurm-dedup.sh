#!/usr/bin/env bash
# A pipeline with a dedup step on a Slurm cluster: each phase of the step is a job array that
# starts once the one before it has succeeded, then one merge job.
#
#   N=16 M=8 PIPELINE=/shared/pipeline-dedup.yaml OUTPUT=/shared/deduped \
#       examples/cluster/slurm-dedup.sh
#
#   docs        N tasks  the stages in front of the step, then this shard's signatures
#   buckets     M tasks  the LSH passes, dealt round-robin (tasks beyond the passes idle);
#                        semantic: k-means fitted by the M tasks together (they must run at
#                        the same time: give the cluster room for M at once), then each
#                        task's clusters
#   components  1 task   verification (or the bucket tasks' pairs joined), groups, _duplicates/
#   output      N tasks  the verdict applied, the stages after the step, the sink
#   merge       1 task   checks every output shard finished; _manifest.json, _summary.json
#
# Every task shares the step's work directory (execution.spill_dir, else OUTPUT/_dedup_work)
# on storage all nodes mount. A failed task fails its array, and afterok holds the rest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
N="${N:-8}"
M="${M:-4}"
export CURATOR="${CURATOR:-curator-host}"
export PIPELINE="${PIPELINE:-$here/pipeline-dedup.yaml}"
export PLUGINS="${PLUGINS:-plugins}"
OUTPUT="${OUTPUT:?set OUTPUT to the sink path of the pipeline}"
SBATCH="${SBATCH:-sbatch}"
phase() { # PHASE DEPENDENCY [ARRAY]
    PHASE="$1" "$SBATCH" --parsable --export=ALL ${2:+--dependency=afterok:$2} ${3:+--array=$3} "$here/slurm.sbatch"
}
docs=$(phase docs "" "0-$((N - 1))")
buckets=$(phase buckets "$docs" "0-$((M - 1))")
components=$(phase components "$buckets")
output=$(phase output "$components" "0-$((N - 1))")
"$SBATCH" --parsable --dependency="afterok:$output" --wrap "$CURATOR merge $OUTPUT"
