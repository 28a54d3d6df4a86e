#!/usr/bin/env bash
# One (case, mode) of the programs tier: run tests/programs/case_CASE.sh MODE,
# then judge the statistics reports its preloaded processes left against the
# expectation from expect.txt:
#   pairs      connections paired (local.paired.connected >= 1: the client
#              found the server's offer) and bytes took the local path
#              (path.local.*bytes > 0).  local.paired.accepted is shown but
#              not required: it is counted in the accepting process, and a
#              daemon stopped by SIGTERM (rsync, git daemon, mosquitto ...)
#              often leaves no report (p_stop notes the daemons it stops
#              that had the library mapped in stats/loaded.<pid>)
#   handsback  at least one connection was handed back (local.handed_back >= 1)
#   plain      the library ran (reports with calls) but nothing paired and no
#              byte took the local path; in mode none: no report at all
# A case that writes a percentage P into $P_ART/pair_min (a proxy under
# load, mode both) also needs P % of the connections that could pair to
# have paired: local.paired.connected against it plus every decline but
# "closed" (the server answered and closed before the client looked: a
# connection over before it could pair, which a retry would meet too),
# "short" (pair when it pays, the default: it ended before it paid) and
# "learned_short" (left alone after a run of such connections).
# Usage: one.sh CASE MODE EXPECT     (exit 0 pass, 77 skip, else fail)
set -u
case_=$1 mode=$2 expect=$3
cd "$(dirname "$0")/../.."
ZC_BUILD=${ZC_BUILD:-build}
export P_ART=$PWD/$ZC_BUILD/test-logs/${PROGRAMS_TIER:-programs}/$case_-$mode.d
tests/programs/case_$case_.sh "$mode"
rc=$?
[ $rc -eq 77 ] && exit 77
# the reports: sums over every process of the run
summary=$(cat "$P_ART"/stats/stats.* 2>/dev/null | awk '
  /^# zcsock .* stats pid=/ { reports++ }
  /^calls\.[A-Za-z0-9_]+: [0-9]+$/ { calls += $2 }
  /^local\.paired\.accepted: / { acc += $2 }
  /^local\.paired\.connected: / { con += $2 }
  /^path\.local\.[a-z_]*bytes: / { lb += $2 }
  /^local\.handed_back: / { hb += $2 }
  /^local\.handed_over: / { ho += $2 }
  /^local\.declined\.[A-Za-z0-9_]+: [0-9]+$/ && $2 > 0 { k = $1; sub(/^local\.declined\./, "", k); sub(/:$/, "", k); dec[k] += $2 }
  /^local\.never_paired\.[A-Za-z0-9_]+: [0-9]+$/ && $2 > 0 { k = $1; sub(/^local\.never_paired\./, "", k); sub(/:$/, "", k); dec["never_paired." k] += $2 }
  /^local\.handed_back\.[A-Za-z0-9_]+: [0-9]+$/ && $2 > 0 { k = $1; sub(/^local\.handed_back\./, "", k); sub(/:$/, "", k); dec["handed_back." k] += $2 }
  END {
    d = ""; for (k in dec) d = d " " k "=" dec[k]
    printf "%d %d %d %d %.0f %d %d%s\n", reports + 0, calls + 0, acc + 0, con + 0, lb + 0, hb + 0, ho + 0, d
  }')
read -r reports calls acc con lb hb ho dec <<<"$summary"
loaded=$(ls "$P_ART"/stats/loaded.* 2>/dev/null | wc -l)
echo "stats: reports=$reports loaded(daemons seen with the library mapped)=$loaded calls=$calls paired.accepted=$acc paired.connected=$con path.local.bytes=$lb handed_back=$hb handed_over=$ho declined/never paired/handed back:${dec:- none}"
got=plain
[ "$con" -gt 0 ] && [ "$lb" -gt 0 ] && got=pairs
[ "$got" = plain ] && [ "$hb" -gt 0 ] && got=handsback
ok=1
case $mode in
  none) [ "$reports" -eq 0 ] && [ "$loaded" -eq 0 ] || { echo "FAIL: mode none but the library ran ($reports reports, $loaded loaded)"; ok=0; } ;;
  *)    [ "$calls" -gt 0 ] || [ "$loaded" -gt 0 ] || { echo "FAIL: no report with calls and no daemon with the library mapped: the library did not run"; ok=0; } ;;
esac
if [ -f "$P_ART/pair_min" ]; then
  min=$(cat "$P_ART/pair_min")
  rate=$(echo "$con $dec" | awk '{ e = $1; for (i = 2; i <= NF; i++) { split($i, kv, "=");
    if (kv[1] !~ /^(closed|short|learned_short|never_paired\..*|handed_back\..*)$/) e += kv[2] }
    printf "%.2f", e ? 100 * $1 / e : 0 }')
  echo "pairing: $rate % of the connections that could pair paired (at least $min % needed)"
  awk -v r="$rate" -v m="$min" 'BEGIN { exit !(r >= m) }' ||
    { echo "FAIL: only $rate % of the connections that could pair paired"; ok=0; }
fi
case $expect in
  pairs)     [ "$got" = pairs ] || { echo "FAIL: expected the connection to pair, it did not ($got)"; ok=0; } ;;
  any)       ;;
  handsback) [ "$hb" -gt 0 ] || { echo "FAIL: expected a hand-back, local.handed_back is 0 ($got)"; ok=0; } ;;
  plain)     [ "$acc" -eq 0 ] && [ "$con" -eq 0 ] && [ "$lb" -eq 0 ] ||
               { echo "FAIL: expected plain, but paired ($acc accepted, $con connected, $lb local bytes)"; ok=0; } ;;
  *) echo "FAIL: unknown expectation $expect"; ok=0 ;;
esac
echo "result: case=$case_ mode=$mode workload=$([ $rc -eq 0 ] && echo ok || echo "FAILED($rc)") expected=$expect observed=$got"
[ $rc -eq 0 ] && [ $ok -eq 1 ]
