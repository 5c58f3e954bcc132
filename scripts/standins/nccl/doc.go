// Package nccl holds gpuaccept's MPI stand-in for NVIDIA nccl-tests (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, sendrecv_perf): nccl_perf.c, built with mpicc by build.sh. It runs a
// real MPI collective over the lab's shaped links and prints the nccl-tests 2.18 text layout; see README.md.
// The Go code here is only its test.
package nccl
