#!/usr/bin/env bash
# Fail when a library exports a defined dynamic symbol that no exports.txt
# declares (or declares a name it does not export).
# usage: scripts/check-symbols.sh LIB EXPORTS_FILE...
set -euo pipefail
lib=$1; shift
allowed=$(grep -hv '^#' "$@" | sed '/^$/d' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
extra=$(comm -13 <(echo "$allowed") <(echo "$exported"))
missing=$(comm -23 <(echo "$allowed") <(echo "$exported"))
rc=0
if [ -n "$extra" ]; then echo "check-symbols: $lib exports undeclared symbols:"; echo "$extra" | sed 's/^/  /'; rc=1; fi
if [ -n "$missing" ]; then echo "check-symbols: declared but not exported:"; echo "$missing" | sed 's/^/  /'; rc=1; fi
[ $rc -eq 0 ] && echo "check-symbols: $(echo "$exported" | wc -l) exported symbols, all declared"
exit $rc
