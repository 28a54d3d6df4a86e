#!/usr/bin/env bash
# One t_xchg run: case.sh BIN CASE FAMILY THP EXCHANGE THP_FILE CHECK...
# (see run.sh).  Sets shmem THP for the run when asked for never.
bin=$1 mode=$2 fam=$3 thp=$4 ex=$5 thpf=$6; shift 6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ "$thp" = never ] || [ "$thp" = hugetlb ]; then
  old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thpf")
  if [ "$old" != never ]; then
    echo never > "$thpf" 2>/dev/null || { echo "cannot turn shmem THP off (not root)"; exit 77; }
    trap 'echo "$old" > "$thpf"; rm -rf "$dir"' EXIT
  fi
fi
tlb_avail() { echo $(( $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages) -
                      $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages) )); }
[ -n "$XCHG_TLB_LEAK" ] && tlb0=$(tlb_avail)
# EXCHANGE "default": ZCSOCK_EXCHANGE left unset
[ "$ex" = default ] && exn=(-u ZCSOCK_EXCHANGE) || exn=(ZCSOCK_EXCHANGE="$ex")
# every unit lent at its first send (the rent-or-buy rule would rent some
# on a machine whose new pages cost more than a ring pass) unless the case
# sets ZCSOCK_EXCHANGE_UNIT_US itself in XCHG_ENV
env "${exn[@]}" ZCSOCK_EXCHANGE_UNIT_US=1 ${XCHG_ENV:-} ZCSOCK_LOCAL_UNIX=1 ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$dir/%p.log" \
  LD_PRELOAD="$ZC_LIB" "$bin" "$mode" "$fam" || exit 1
cat "$dir"/*.log | grep -E '^(xchg\.refused|local\.xchg|path\.local\.send_bytes|pdc\.xu\.(hits|regs)|xu\.(buy|rent)_us|mh\.units)' | grep -v ': 0$'
rc=0
if [ -n "$XCHG_TLB_LEAK" ] && [ "$(tlb_avail)" != "$tlb0" ]; then
  echo "hugetlb pool: $tlb0 pages free before, $(tlb_avail) after"; rc=1
fi
for chk in "$@"; do
  key=${chk%%[<>=]*} op=${chk#"$key"}
  val=$(cat "$dir"/*.log | awk -F': ' -v k="$key" '$1 == k { s += $2 } END { printf "%.0f\n", s }')
  case $op in
    \>=*) [ "$val" -ge "${op#>=}" ] ;;
    \>*)  [ "$val" -gt "${op#>}" ] ;;
    ==*)  [ "$val" -eq "${op#==}" ] ;;
    \<=*) [ "$val" -le "${op#<=}" ] ;;
  esac || { echo "statistics: $key is $val, want $op"; rc=1; }
done
exit $rc
