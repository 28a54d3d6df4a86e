#!/usr/bin/env bash
# python3 -m http.server + curl: the standard library's threading HTTP server
# serves a 64 MiB file (QUICK=1: 16 MiB) and a few small ones (0, 1 and 4097
# bytes) from a temp dir; curl fetches the big file over 4 parallel
# connections (one curl process, --parallel), then the small files, a HEAD
# and the directory listing.  Bodies are checked against their sha256; the
# listing must be the same with and without the library.  http.server runs
# with SIGTERM mapped to KeyboardInterrupt so that it exits normally.
set -u
. "$(dirname "$0")/lib.sh"
e2e_setup httpserver
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }

SIZE=$((64 << 20))
[ "$QUICK" = 1 ] && SIZE=$((16 << 20))
WWW=$E2E_TMP/www
mkdir -p "$WWW"
e2e_gen httpserver "$SIZE" >"$WWW/big.bin"
: >"$WWW/empty"
printf x >"$WWW/one"
e2e_gen small 4097 >"$WWW/page.bin"
SHA_BIG=$(e2e_sha256 <"$WWW/big.bin")
SHA_EMPTY=$(e2e_sha256 </dev/null)
SHA_ONE=$(printf x | e2e_sha256)
SHA_PAGE=$(e2e_sha256 <"$WWW/page.bin")

run_once() {
  local port spid fail=0 rc
  port=$(e2e_free_port) || e2e_die "no free port"
  e2e_bg "$E2E_ART/$E2E_MODE-server.log" "$E2E_PY" -c '
import runpy, signal, sys
signal.signal(signal.SIGTERM, signal.default_int_handler)
sys.argv[0] = "http.server"
runpy.run_module("http.server", run_name="__main__", alter_sys=True)' \
    --bind 127.0.0.1 --directory "$WWW" "$port"
  spid=$E2E_LAST_PID
  e2e_wait_listen "$port" 20 || { cat "$E2E_ART/$E2E_MODE-server.log"; e2e_die "http.server never listened"; }
  local base=http://127.0.0.1:$port
  E2E_CURL_PIDS=
  e2e_curl parallel "$SHA_BIG $SHA_BIG $SHA_BIG $SHA_BIG" --parallel --parallel-max 4 \
    -o BODY1 "$base/big.bin" -o BODY2 "$base/big.bin" -o BODY3 "$base/big.bin" -o BODY4 "$base/big.bin" || fail=1
  e2e_curl small "$SHA_EMPTY $SHA_ONE $SHA_PAGE" \
    -o BODY1 "$base/empty" -o BODY2 "$base/one" -o BODY3 "$base/page.bin" || fail=1
  e2e_curl listing "" -sS -f -I -o "$E2E_ART/$E2E_MODE-head.txt" "$base/big.bin" \
    --next -w '%{http_code}/%{size_download} ' -o "$E2E_ART/$E2E_MODE-listing.html" "$base/" || fail=1
  grep -q 'href="big.bin"' "$E2E_ART/$E2E_MODE-listing.html" || { e2e_say "listing does not name big.bin"; fail=1; }
  grep -q "Content-Length: $SIZE" "$E2E_ART/$E2E_MODE-head.txt" || { e2e_say "HEAD has no Content-Length: $SIZE"; fail=1; }
  e2e_stop "$spid" 10; rc=$?
  [ $rc -eq 0 ] || { e2e_say "http.server exited $rc after TERM"; fail=1; }
  RUN_PIDS="$spid $E2E_CURL_PIDS"
  return $fail
}

# the directory listing must be the same as without the library
run() {
  local rc
  run_once; rc=$?
  if [ "$E2E_MODE" != plain ] && ! cmp -s "$E2E_ART/plain-listing.html" "$E2E_ART/$E2E_MODE-listing.html"; then
    e2e_say "directory listing differs with the library"; rc=1
  fi
  return $rc
}
check() {
  e2e_check_active 4 $RUN_PIDS
  e2e_expect_path some "httpserver ($1)" $RUN_PIDS || e2e_die "the connections did not take the local path"
}
e2e_compare run check

word() { [ "$1" -eq 0 ] && echo "3/3 ok" || echo "FAILED"; }
e2e_summary http.server word "file $SIZE bytes x4 parallel"
exit 0
