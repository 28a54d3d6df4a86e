#!/usr/bin/env bash
# Tier "symbols": the library exports only what exports.txt files declare
# and never calls its own exported hooks, the local path's files call no
# higher layer (scripts/check-layers.py),
# and the check itself catches an undeclared export.
. "$(dirname "$0")/lib/harness.sh"
t_begin symbols
t_run check-symbols 60 scripts/check-symbols.sh "$ZC_LIB" "$@"
t_run check-symbols-catches-leak 60 bash -c '
  declared=$(mktemp); grep -hv "^#" "$@" | grep -v "^zcsock_version$" > "$declared"
  if scripts/check-symbols.sh "$ZC_LIB" "$declared"; then rm -f "$declared"; exit 1; fi
  rm -f "$declared"' _ "$@"
# the library never calls its own exported hooks (scripts/check-self-calls.sh)
t_run check-self-calls 60 scripts/check-self-calls.sh "$ZC_LIB"
t_run check-self-calls-catches 60 bash -c '
  d=$(mktemp -d); trap "rm -rf $d" EXIT
  printf "int close(int fd) { return fd; }\nint zc_f(int x) { return close(x) + 1; }\n" > "$d/x.c"
  ${CC:-cc} -shared -fPIC -O1 -o "$d/x.so" "$d/x.c" || exit 1
  ! scripts/check-self-calls.sh "$d/x.so"'
# the local path's layers: no file calls a higher layer nor more than three
# siblings of its own (scripts/check-layers.py; issue 32), and the check
# catches a file that calls up
t_run check-layers 60 python3 scripts/check-layers.py
t_run check-layers-catches 60 bash -c '
  d=$(mktemp -d); trap "rm -rf $d" EXIT
  printf "int lp_a(void)\n{\n    return lp_b();\n}\n" > "$d/conn.c"
  printf "int lp_b(void)\n{\n    return 1;\n}\n" > "$d/send.c"
  ! python3 scripts/check-layers.py "$d"'
t_run no-undefined-nonlibc 60 bash -c '
  # every undefined symbol must come from libc, libdl, libpthread or the
  # libraries the modules link (liburing, libgcc_s)
  ldd "$ZC_LIB" | grep -q "not found" && exit 1; exit 0'
t_end
