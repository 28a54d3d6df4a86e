#!/usr/bin/env bash
# Tier "live": zcsock stat against running programs under the library
# (tests/live/t_live.py: a paired stream, redis-server under redis-benchmark,
# a forking server, exit/_exit/exec/SIGKILL, ZCSOCK_LIVE=0, another user,
# a directory another user made first, advice, page exchange read live with
# tests/live/t_advise.c: root sets shmem THP for those cases, put back after).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
T=${TEST_TIMEOUT:-120}; [ "$T" -gt 120 ] && T=120
PY=${PYTHON:-python3}
t_begin live
for c in stream threads top conns many redis mpi fork fork_short shm_small shm_full exit scribble off other private advise advise_fd advise_untracked advise_xchg xchg advise_pages; do
  t_run "$c" "$T" $PY tests/live/t_live.py "$c"
done
t_end
