#!/usr/bin/env bash
# Tier programs-xchg: the programs tier again with page exchange on
# (ZCSOCK_EXCHANGE=1) in every process, with 2 MiB shared-memory pages: as
# root, shmem THP is set to advise for the tier and put back afterwards.
# Every case must pass as it does without exchange (the same expect.txt),
# and the tier must show, from the statistics, that units were lent and
# mapped (the MPI cases send up to 32 MiB messages).  Without 2 MiB pages
# and no root to turn them on, the tier is one skip.  Every unit is lent
# at its first send (ZCSOCK_EXCHANGE_UNIT_US=1): the most exchange these
# programs can get, where the default would send some through the ring on
# a machine whose new pages cost more than a ring pass.
# XCHG_PAGES=hugetlb (tier programs-xchg-hugetlb): on hugetlb pages
# instead, shmem THP never and 1,024 free hugetlb pages (as root, set for
# the tier and put back).
set -u
cd "$(dirname "$0")/../.."
. tests/lib/thp.sh
xchg_pages programs-xchg
if [ "$THP_HUGE" = 0 ]; then
  . tests/lib/harness.sh
  t_begin $tier
  t_run huge-pages 5 sh -c 'echo "skip: $1"; exit 77' _ "$why"
  t_end
  exit $?
fi
# Mode both only: page exchange needs both ends under the library (the
# other modes are the programs tier's, and pair nothing or only inside the
# server side).
export ZCSOCK_EXCHANGE=1 ZCSOCK_EXCHANGE_UNIT_US=1 PROGRAMS_TIER=$tier PROGRAMS_EXPECT_LENT=1
export PROGRAMS_MODES=${PROGRAMS_MODES:-both}
# the cases that pair nothing even then (plain in expect.txt) are left out:
# no unit is lent there, and the programs tier already runs them
export PROGRAMS_PAIRING_ONLY=${PROGRAMS_PAIRING_ONLY:-1}
# On hugetlb pages, by default the cases whose sends are lent (the MPI
# jobs: 32 MiB messages; no other program here sends 2 MiB at once) and a
# few whose allocations fill the arenas from many threads or processes;
# the 2 MiB-page tier runs every case.  Cases named on the command line run
# whatever the pages.
if [ $# -eq 0 ] && [ "${XCHG_PAGES:-}" = hugetlb ]; then
  set -- mpi_openmpi mpi_mpich haproxy postgres apache_event erlang
  echo "  on hugetlb pages: $* (the 2 MiB-page tier runs every case)"
fi
tests/programs/run.sh "$@"
