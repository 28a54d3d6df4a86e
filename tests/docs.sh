#!/usr/bin/env bash
# Tier "docs": zcsock(1) names every command and stat/top option, zcsock(7)
# is generated from the tables as they are; the ZCSOCK_* table of
# docs/usage.md (the README links it) lists exactly the variables of the
# library's configuration table (as the built library prints them with
# ZCSOCK_VERBOSE=1), with the same numeric defaults; ARCHITECTURE.md, the
# CHANGELOG and each module README exist, and each module README names every
# file of its folder; tests/README's feature map covers every file of the
# local path and names test files that exist.
. "$(dirname "$0")/lib/harness.sh"
t_begin docs

t_docs_config_table() {
  local readme lib
  readme=$(sed -n '/zcsock-config-table/,/end zcsock-config-table/p' docs/usage.md |
           grep -o '^| `ZCSOCK_[A-Z0-9_]*` | [^|]*' | sed 's/^| `\(ZCSOCK_[A-Z0-9_]*\)` | \([^ ]*\).*/\1 \2/' | sort)
  lib=$(env -i LD_PRELOAD="$ZC_LIB" ZCSOCK_VERBOSE=1 /bin/true 2>&1 |
        sed -n 's/^zcsock\[[0-9]*\]: config \(ZCSOCK_[A-Z0-9_]*\)=\([^ ]*\).*/\1 \2/p' | sort)
  echo "README:"; echo "$readme"; echo "library:"; echo "$lib"
  [ -n "$lib" ] || return 1
  # names must match exactly; numeric defaults must match, empty ones are
  # written as "(...)" in the README
  diff <(awk '{print $1}' <<<"$readme") <(awk '{print $1}' <<<"$lib") || return 1
  join <(echo "$readme") <(echo "$lib") | grep -v "^ZCSOCK_VERBOSE " | while read -r name doc val; do
    if [[ $doc =~ ^[0-9] ]]; then [ "$doc" = "$val" ] || { echo "$name: README $doc, library $val"; exit 1; }
    else [ -z "$val" ] || [[ $doc == \(* ]] || { echo "$name: README $doc, library $val"; exit 1; }; fi
  done
}

t_docs_files() {
  local f rc=0
  for f in README.md ARCHITECTURE.md shim/README.md common/README.md shim/paths/local/README.md shim/paths/test/README.md pindown-cache/README.md \
           malloc-hooks/README.md launcher/README.md examples/README.md tests/README.md docs/README.md \
           CHANGELOG.md; do
    [ -s "$f" ] || { echo "missing $f"; rc=1; }
  done
  # each folder README names every tracked file directly in its folder
  # (`name` or, for a header and its source, `stem.[ch]`)
  local r d b n
  for r in shim/README.md common/README.md shim/paths/local/README.md shim/paths/test/README.md \
           pindown-cache/README.md malloc-hooks/README.md launcher/README.md examples/README.md \
           tests/README.md docs/README.md; do
    d=$(dirname "$r")
    n=$(awk -F/ '{print NF}' <<<"$d")
    for f in $(git ls-files "$d" 2>/dev/null | awk -F/ -v n="$n" 'NF == n + 1'); do
      b=$(basename "$f")
      [ "$b" = README.md ] && continue
      grep -qF -- "\`$b\`" "$r" || grep -qF -- "\`${b%.*}.[" "$r" ||
        { echo "$r does not name $b"; rc=1; }
    done
  done
  return $rc
}

# zcsock(1) documents every command of the launcher and every option of
# stat and top (their usage texts, launcher/stat.c)
t_docs_man() {
  local c o rc=0
  for c in $(sed -n 's/^\t{ "\([a-z]*\)", zcl_cmd_[a-z]* },.*/\1/p' launcher/main.c); do
    grep -q "^\.B zcsock $c" docs/zcsock.1 || { echo "zcsock(1) lacks command $c"; rc=1; }
  done
  for o in $(grep -o '\-\-[a-z]*' launcher/stat.c | sort -u); do
    grep -q -- "${o//-/\\\\-}" docs/zcsock.1 || { echo "zcsock(1) lacks option $o"; rc=1; }
  done
  return $rc
}
# zcsock(7) is what docs/gen_man7.c makes of the configuration and counter
# tables now (make man)
t_docs_man7() {
  [ -x "$GEN_MAN7" ] || { echo "no generator ($GEN_MAN7)"; return 1; }
  "$GEN_MAN7" | diff -u docs/zcsock.7 - || { echo "docs/zcsock.7 is stale: run make man"; return 1; }
}
# tests/README's feature map has a row for every file of the local path
# and names only test files that exist
t_docs_feature_map() {
  local map f rc=0
  map=$(sed -n '/<!-- feature-map -->/,/<!-- end feature-map -->/p' tests/README.md)
  [ -n "$map" ] || { echo "tests/README.md has no feature map"; return 1; }
  for f in $(git ls-files shim/paths/local | grep '\.c$'); do
    grep -q "^| \`$(basename "$f")\` |" <<<"$map" || { echo "feature map: no row for $f"; rc=1; }
  done
  for f in $(grep -o '`tests/[^`]*`' <<<"$map" | tr -d '`' | sort -u); do
    [ -e "$f" ] || { echo "feature map: $f does not exist"; rc=1; }
  done
  return $rc
}
export -f t_docs_config_table t_docs_files t_docs_man t_docs_man7 t_docs_feature_map
t_run readme-config-table 60 bash -c t_docs_config_table
t_run module-readmes 60 bash -c t_docs_files
t_run man-page 60 bash -c t_docs_man
t_run man-page-7 60 bash -c t_docs_man7
t_run feature-map 60 bash -c t_docs_feature_map
t_end
