# thp_allow: 2 MiB shared-memory pages (shmem THP) for a tier that needs
# them (page exchange lends only on them).  Sets THP_HUGE=1 when shmem THP
# is advise, within_size or always, or when, as root, it could set advise
# (then put back at exit: an EXIT trap); else THP_HUGE=0.  THP_OLD holds the
# setting found; THP_FILE the sysfs file.
THP_FILE=/sys/kernel/mm/transparent_hugepage/shmem_enabled
thp_restore() { [ -n "$THP_OLD" ] && echo "$THP_OLD" > "$THP_FILE" 2>/dev/null; true; }
thp_allow() {
  THP_OLD=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP_FILE" 2>/dev/null)
  THP_HUGE=0
  case $THP_OLD in
    advise|always|within_size) THP_HUGE=1 ;;
    *) if [ -w "$THP_FILE" ] && echo advise > "$THP_FILE" 2>/dev/null; then
         THP_HUGE=1; trap thp_restore EXIT
       fi ;;
  esac
}
