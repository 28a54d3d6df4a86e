#!/usr/bin/env bash
# Tier "install": `make install` into a DESTDIR lays out the library,
# launcher, benchmark, header, pkg-config file and docs, and the installed
# launcher finds and preloads the installed library.
. "$(dirname "$0")/lib/harness.sh"
t_begin install

t_install_layout() {
  local d; d=$(mktemp -d)
  trap 'rm -rf "$d"' RETURN
  make --no-print-directory install DESTDIR="$d" PREFIX=/opt/zc >/dev/null || return 1
  local f
  for f in lib/libzcsock.so bin/zcsock bin/zcbench include/zcsock.h lib/pkgconfig/zcsock.pc \
           share/doc/zcsock/README.md share/doc/zcsock/ARCHITECTURE.md share/man/man1/zcsock.1 share/man/man7/zcsock.7; do
    [ -e "$d/opt/zc/$f" ] || { echo "missing $f"; return 1; }
  done
  grep -q '^Version: ' "$d/opt/zc/lib/pkgconfig/zcsock.pc" &&
  grep -q '^prefix=/opt/zc$' "$d/opt/zc/lib/pkgconfig/zcsock.pc" &&
  grep -q '^libdir=${prefix}/lib$' "$d/opt/zc/lib/pkgconfig/zcsock.pc" || return 1
  # the installed launcher finds the installed library (../lib next to bin)
  local out
  out=$(env -u ZCSOCK_LIBRARY "$d/opt/zc/bin/zcsock" run -- sh -c 'echo "$LD_PRELOAD"') || return 1
  echo "LD_PRELOAD in child: $out"
  [ "$out" = "$d/opt/zc/lib/libzcsock.so" ]
}

t_pkgconfig_builds() {
  local d; d=$(mktemp -d)
  trap 'rm -rf "$d"' RETURN
  make --no-print-directory install DESTDIR="$d" PREFIX="$d/p" >/dev/null || return 1
  printf '#include <zcsock.h>\nint main(void){return zcsock_is_active() ? 0 : 3;}\n' > "$d/t.c"
  # linking against the library makes it active without LD_PRELOAD
  local flags
  flags=$(PKG_CONFIG_PATH="$d$d/p/lib/pkgconfig" pkg-config --define-prefix --cflags --libs zcsock) || return 1
  echo "pkg-config: $flags"
  cc -o "$d/t" "$d/t.c" $flags &&
  LD_LIBRARY_PATH="$d$d/p/lib" "$d/t"
}

export -f t_install_layout t_pkgconfig_builds
t_run layout 120 bash -c t_install_layout
t_run pkg-config-link 120 bash -c t_pkgconfig_builds
t_end
