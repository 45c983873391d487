#!/bin/sh
# bench_dist.sh BENCH_DIST_BINARY [STEPS [SHAPE]]  (make bench-dist)
# The same training step as one process with two threads and as two MPI ranks
# with one thread each; the load average before and after, since the figures
# are provisional on a shared machine (run under a flock shared by the memory-hungry jobs
# there: dim-768 needs about 2.5 GB per process).
set -e
b=$1
shift
echo "loadavg before: $(cat /proc/loadavg)"
OMP_NUM_THREADS=2 "$b" "$@"
OMP_NUM_THREADS=1 mpirun -q --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS -np 2 "$b" "$@"
echo "loadavg after: $(cat /proc/loadavg)"
