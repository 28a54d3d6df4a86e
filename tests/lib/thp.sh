# Huge pages for the tiers that need them; every setting changed is put
# back at exit (one EXIT trap, hp_restore).
#
# thp_allow: 2 MiB shared-memory pages (shmem THP) for a tier that needs
# them (page exchange lends only on them).  Sets THP_HUGE=1 when shmem THP
# is advise, within_size or always, or when, as root, it could set advise;
# else THP_HUGE=0.  THP_OLD holds the setting found; THP_FILE the sysfs file.
#
# tlb_allow N: at least N free 2 MiB hugetlb pages and shmem THP `never`
# (malloc-hooks takes hugetlb only when shmem THP is off), as root if need
# be.  Sets TLB_OK=1 when both hold, else 0 and TLB_WHY says what is
# missing.  tlb_pages N: the pages alone.
THP_FILE=/sys/kernel/mm/transparent_hugepage/shmem_enabled
TLB_FILE=/proc/sys/vm/nr_hugepages
thp_now() { sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP_FILE" 2>/dev/null; }
hp_restore() {
  [ -n "${THP_OLD:-}" ] && echo "${THP_OLD:-}" > "$THP_FILE" 2>/dev/null
  [ -n "${TLB_OLD:-}" ] && echo "${TLB_OLD:-}" > "$TLB_FILE" 2>/dev/null
  true
}
thp_set() {   # MODE: 0 when shmem THP is MODE now
  [ "$(thp_now)" = "$1" ] && return 0
  [ -w "$THP_FILE" ] || return 1
  [ -n "${THP_OLD:-}" ] || THP_OLD=$(thp_now)
  echo "$1" > "$THP_FILE" 2>/dev/null || return 1
  trap hp_restore EXIT
}
thp_allow() {
  THP_OLD=${THP_OLD:-$(thp_now)}
  THP_HUGE=0
  case $(thp_now) in
    advise|always|within_size) THP_HUGE=1 ;;
    *) thp_set advise && THP_HUGE=1 ;;
  esac
}
tlb_free() { awk '/^HugePages_Free:/ {print $2}' /proc/meminfo; }
tlb_pages() {   # N: at least N free hugetlb pages (TLB_OK, TLB_WHY)
  local want=$1 free
  TLB_OK=0
  free=$(tlb_free)
  if [ "${free:-0}" -lt "$want" ]; then
    if [ ! -w "$TLB_FILE" ]; then TLB_WHY="fewer than $want free hugetlb pages (not root)"; return; fi
    [ -n "${TLB_OLD:-}" ] || TLB_OLD=$(cat "$TLB_FILE")
    trap hp_restore EXIT
    echo $(( $(cat "$TLB_FILE") + want - ${free:-0} )) > "$TLB_FILE" 2>/dev/null
    free=$(tlb_free)
    if [ "${free:-0}" -lt "$want" ]; then TLB_WHY="the kernel gave only ${free:-0} of $want hugetlb pages"; return; fi
  fi
  TLB_OK=1
}
tlb_allow() {   # N
  tlb_pages "$1"
  [ "$TLB_OK" = 1 ] || return
  TLB_OK=0
  if ! thp_set never; then TLB_WHY="shmem THP is $(thp_now), not never (not root)"; return; fi
  TLB_OK=1
}

# xchg_pages TIER: the pages a page-exchange tier runs on, from XCHG_PAGES:
# thp (default: shmem THP advise), hugetlb (tlb_allow 1024) or 4k (shmem
# THP never, ZCSOCK_EXCHANGE_4K=1 exported).  Sets tier (TIER, or with a
# -hugetlb / -4k suffix), THP_HUGE=1 when the pages are there, else 0 and
# why says what is missing.
xchg_pages() {
  tier=$1 why="no 2 MiB shared pages here and no root to turn shmem THP on"
  case ${XCHG_PAGES:-thp} in
    hugetlb) tier=$1-hugetlb; tlb_allow 1024; THP_HUGE=$TLB_OK why=${TLB_WHY:-} ;;
    4k) tier=$1-4k THP_HUGE=0 why="cannot set shmem THP to never (not root)"
        thp_set never && THP_HUGE=1
        export ZCSOCK_EXCHANGE_4K=1 ;;
    *) thp_allow ;;
  esac
}
