#!/usr/bin/env bash
# Builds gpuaccept's MPI stand-in for nccl-tests into DIR:
#   all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf sendrecv_perf
# (one source, nccl_perf.c; the collective is picked from the binary's name).
# Usage: build.sh DIR        Needs mpicc (Debian: apt-get install -y libopenmpi-dev openmpi-bin).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
out=$1
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nccl_perf.c"
MPICC=${MPICC:-mpicc}
if ! command -v "$MPICC" >/dev/null 2>&1; then
  echo "build.sh: $MPICC not found (apt-get install -y libopenmpi-dev openmpi-bin)" >&2
  exit 1
fi
mkdir -p "$out"
for coll in all_reduce all_gather reduce_scatter alltoall sendrecv; do
  "$MPICC" -O2 -Wall -o "$out/${coll}_perf" "$src"
done
