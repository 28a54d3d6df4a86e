#!/usr/bin/env bash
# Tier programs-xchg: the programs tier again with page exchange on
# (ZCSOCK_EXCHANGE=1) in every process, with 2 MiB shared-memory pages: as
# root, shmem THP is set to advise for the tier and put back afterwards.
# Every case must pass as it does without exchange (the same expect.txt),
# and the tier must show, from the statistics, that units were lent and
# mapped (the MPI cases send up to 32 MiB messages).  Without 2 MiB pages
# and no root to turn them on, the tier is one skip.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/thp.sh
thp_allow
if [ "$THP_HUGE" = 0 ]; then
  . tests/lib/harness.sh
  t_begin programs-xchg
  t_run huge-pages 5 sh -c 'echo "no 2 MiB shared pages here and no root to turn shmem THP on"; exit 77'
  t_end
  exit $?
fi
export ZCSOCK_EXCHANGE=1 PROGRAMS_TIER=programs-xchg PROGRAMS_EXPECT_LENT=1
tests/programs/run.sh "$@"
