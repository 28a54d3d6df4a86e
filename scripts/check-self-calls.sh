#!/usr/bin/env bash
# Fail when the library's code calls one of its own exported hooks through
# the PLT (a plain close(), syscall(), mmap() ... in library code binds to the
# library's own interposed symbol: the hook's bookkeeping would run for the
# library's own work).  Library code makes its system calls through
# zc_syscall/zc_sys (common/zc_sys.h) or zc_real.
#
# Allowed, by design, as "CALLER SYMBOL" pairs: an exported alias or
# fortified entry forwarding to its hook (mmap64, __poll_chk, ...), and
# allocations that go to the application's allocator through malloc-hooks'
# own interposed entry (its realloc fallbacks, liburing's probe buffers, the
# statically linked unwinder's legacy frame registry, __register_frame* and
# the sorting in search_object, which nothing of ours calls: frame_dummy
# registers nothing where objects carry PT_GNU_EH_FRAME).
# usage: scripts/check-self-calls.sh LIB
set -euo pipefail
lib=$1
allowed="mmap64 mmap
__poll_chk poll
__ppoll_chk ppoll
reallocarray realloc
mh_alloc_move malloc
mh_alloc_move free
mh_realloc_slow malloc
mh_realloc_slow free
io_uring_get_probe_ring calloc
io_uring_get_probe_ring free
io_uring_free_probe free
search_object malloc
search_object free
__register_frame malloc
__register_frame_table malloc
__deregister_frame free
__deregister_frame_info_bases free"
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
# every call or jump through a PLT slot, with the function it is in
calls=$(objdump -d --no-show-raw-insn "$lib" | awk '
  /^[0-9a-f]+ <[^>]+>:$/ { fn = $2; gsub(/[<>:]/, "", fn) }
  /(call|jmp) +[0-9a-f]+ <[^>]+@plt>/ {
    match($0, /<[^>]+@plt>/); s = substr($0, RSTART + 1, RLENGTH - 6); print fn, s }' | sort -u)
bad=$(echo "$calls" | awk 'NR == FNR { ex[$1] = 1; next } ($2 in ex)' <(echo "$exported") - |
      grep -vxFf <(echo "$allowed") || true)
n=$(echo "$calls" | awk 'NR == FNR { ex[$1] = 1; next } ($2 in ex)' <(echo "$exported") - | wc -l)
if [ -n "$bad" ]; then
  echo "check-self-calls: library code calls its own exported hooks (caller symbol):"
  echo "$bad" | sed 's/^/  /'
  exit 1
fi
echo "check-self-calls: no library code calls its own hooks ($n allowed forwarding calls)"
