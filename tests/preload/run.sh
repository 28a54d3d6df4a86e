#!/usr/bin/env bash
# Tier "preload": every test program without the library, with it, and from
# another library's constructor; then the environment-handling checks.
. "$(dirname "$0")/../lib/harness.sh"
dir=$1; shift
t_begin preload
for t in "$@"; do
  t_run "$t/plain"   60 env -u LD_PRELOAD T_EXPECT_PRELOAD=0 "$dir/$t"
  t_run "$t/preload" 60 env LD_PRELOAD="$ZC_LIB" T_EXPECT_PRELOAD=1 "$dir/$t"
  t_run "$t/ctor"    60 env LD_PRELOAD="$ZC_LIB" T_EXPECT_PRELOAD=1 "$dir/${t}_ctor"
done
# the same connection with the local path off: the copy path carries it
for t in "$@"; do
  case $t in t_sendrecv)
    t_run "$t/copy-path" 60 env LD_PRELOAD="$ZC_LIB" ZCSOCK_LOCAL=0 T_EXPECT_PRELOAD=1 \
      T_EXPECT_PATH=copy "$dir/$t" ;;
  esac
done
. "$(dirname "$0")/env_cases.sh"
t_end
