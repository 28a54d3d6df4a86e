#!/usr/bin/env bash
# OpenLDAP slapd (slapd.conf of our own, back_mdb in $P_TMP, a free port,
# slapd -d 0 in the foreground): ldapadd loads 400 people and 3 entries
# with a 1 MiB binary attribute (audio, base64 in the LDIF), then per
# round: the whole tree searched 10 times in a row and 8 times at once,
# 100 single-entry searches in a row (one connection each), and the 3
# large values replaced by ldapmodify (the tree searched again).  Every
# search's LDIF (ldapsearch -LLL, unwrapped) must hash the same as the LDIF
# we loaded.  Repeated.  slapd used to segfault at its first connection
# under the library in the server (an epoll race between its listener
# thread and its worker threads).
set -u
. "$(dirname "$0")/lib.sh"
p_setup slapd "$1"
p_need slapd ldapadd ldapmodify ldapsearch python3 openssl
[ -f /usr/lib/ldap/back_mdb.so ] && [ -f /etc/ldap/schema/inetorgperson.schema ] ||
  { echo "skip: no back_mdb or no inetorgperson schema"; exit 77; }
REPS=$(p_reps 3) BASE=dc=example,dc=com ADMIN=cn=admin,dc=example,dc=com
mkdir -p "$P_TMP/db"
port=$(p_free_port) || p_die "no free port"
cat >"$P_TMP/slapd.conf" <<EOF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile $P_TMP/slapd.pid
argsfile $P_TMP/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
sizelimit unlimited
threads 8
database mdb
maxsize 1073741824
suffix "$BASE"
rootdn "$ADMIN"
rootpw secret
directory $P_TMP/db
EOF
# gen.py ROUND FULL MOD [DIR]: FULL = the tree as ldapsearch -LLL -o
# ldif-wrap=no gives it back (and as ldapadd takes it) with round ROUND's
# large values; MOD = the ldapmodify LDIF that puts those values in; DIR/uN
# = person N's entry as a search for it alone gives it back
cat >"$P_TMP/gen.py" <<'EOF'
import base64, random, sys
rnd, full, mod = int(sys.argv[1]), sys.argv[2], sys.argv[3]
edir = sys.argv[4] if len(sys.argv) > 4 else None
r = random.Random("slapd-people")
out = ["dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n",
       "dn: ou=people,dc=example,dc=com\nobjectClass: organizationalUnit\nou: people\n"]
for i in range(400):
    out.append("dn: uid=u%d,ou=people,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: u%d\ncn: Person %d\n"
               "sn: Surname%d\nmail: u%d@example.com\ndescription: %s\n"
               % (i, i, i, i, i, r.randbytes(r.randint(10, 600)).hex()))
    if edir:
        open("%s/u%d" % (edir, i), "w").write(out[-1] + "\n")
mods = []
for j in range(3):
    big = base64.b64encode(random.Random("big%d-%d" % (rnd, j)).randbytes(1 << 20)).decode()
    dn = "uid=big%d,ou=people,dc=example,dc=com" % j
    out.append("dn: %s\nobjectClass: inetOrgPerson\nuid: big%d\ncn: Big %d\nsn: Big\naudio:: %s\n" % (dn, j, j, big))
    mods.append("dn: %s\nchangetype: modify\nreplace: audio\naudio:: %s\n" % (dn, big))
open(full, "w").write("\n".join(out) + "\n")
open(mod, "w").write("\n".join(mods) + "\n")
EOF
p_bg "$P_ART/server.log" p_srv slapd -d 0 -h "ldap://127.0.0.1:$port/" -f "$P_TMP/slapd.conf"
spid=$P_LAST_PID
p_wait_listen "$port" 20 || p_die "slapd never listened: $(tail -3 "$P_ART/server.log")"
H=ldap://127.0.0.1:$port/

search() {  # search OUT [FILTER]: the subtree under $BASE
  p_cli timeout -k 2 60 ldapsearch -x -LLL -o ldif-wrap=no -o nettimeout=30 -l 50 -H "$H" -b "$BASE" "${2:-(objectClass=*)}" \
    >"$1" 2>>"$P_ART/client.log"
}
load() {
  mkdir -p "$P_TMP/e"
  python3 "$P_TMP/gen.py" 0 "$P_TMP/want" "$P_TMP/mod" "$P_TMP/e" || return 1
  p_t 60 p_cli timeout -k 2 55 ldapadd -x -H "$H" -D "$ADMIN" -w secret -f "$P_TMP/want" >"$P_TMP/add.out" 2>>"$P_ART/client.log" ||
    { p_say "ldapadd exited $?: $(tail -1 "$P_ART/client.log")"; return 1; }
  p_t 60 search "$P_TMP/got" || { p_say "ldapsearch exited $?: $(tail -1 "$P_ART/client.log")"; return 1; }
  p_same "loaded tree ($(stat -c %s "$P_TMP/want") B of LDIF)" "$(p_sha256 "$P_TMP/want")" "$(p_sha256 "$P_TMP/got")"
}
sequential() {
  local r=$1 i rc=0 want
  want=$(p_sha256 "$P_TMP/want")
  for ((i = 1; i <= 10; i++)); do
    p_t 60 search "$P_TMP/s$i" || { p_say "round $r search $i: ldapsearch exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
    p_same "round $r search $i" "$want" "$(p_sha256 "$P_TMP/s$i")" || rc=1
  done
  return $rc
}
concurrent() {
  local r=$1 i pids=() rc=0 want t0=$SECONDS
  want=$(p_sha256 "$P_TMP/want")
  for ((i = 1; i <= 8; i++)); do search "$P_TMP/c$i" & pids+=($!); P_PIDS+=($!); done
  for ((i = 1; i <= 8; i++)); do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 50)))" || { p_say "round $r concurrent search $i exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
    p_same "round $r concurrent search $i" "$want" "$(p_sha256 "$P_TMP/c$i")" || rc=1
  done
  return $rc
}
singles() {  # singles R: 100 searches of one entry each, one connection each
  local r=$1 i k
  for ((i = 0; i < 100; i++)); do
    k=$(((i * 37 + r * 11) % 400))
    search "$P_TMP/one" "(uid=u$k)" || { p_say "round $r search of u$k exited $?: $(tail -1 "$P_ART/client.log")"; return 1; }
    cat "$P_TMP/one" >>"$P_TMP/one.got"
  done
}
single() {
  local r=$1 i rc=0
  : >"$P_TMP/one.want"; : >"$P_TMP/one.got"
  for ((i = 0; i < 100; i++)); do cat "$P_TMP/e/u$(((i * 37 + r * 11) % 400))" >>"$P_TMP/one.want"; done
  p_t 60 singles "$r" || rc=1
  p_same "round $r 100 single-entry searches" "$(p_sha256 "$P_TMP/one.want")" "$(p_sha256 "$P_TMP/one.got")" || rc=1
  return $rc
}
modify() {
  local r=$1
  python3 "$P_TMP/gen.py" "$r" "$P_TMP/want" "$P_TMP/mod" || return 1
  p_t 60 p_cli timeout -k 2 55 ldapmodify -x -H "$H" -D "$ADMIN" -w secret -f "$P_TMP/mod" >"$P_TMP/mod.out" 2>>"$P_ART/client.log" ||
    { p_say "ldapmodify exited $?: $(tail -1 "$P_ART/client.log")"; return 1; }
  p_t 60 search "$P_TMP/got" || { p_say "ldapsearch exited $?: $(tail -1 "$P_ART/client.log")"; return 1; }
  p_same "round $r tree after replacing 3 MiB of values" "$(p_sha256 "$P_TMP/want")" "$(p_sha256 "$P_TMP/got")"
}
alive() { p_alive "$spid" || { p_say "slapd died: $(tail -3 "$P_ART/server.log")"; return 1; }; }
p_step load load || REPS=0
for ((r = 1; r <= REPS; r++)); do
  p_step "sequential$r" sequential "$r" || break
  p_step "concurrent$r" concurrent "$r" || break
  p_step "single$r" single "$r" || break
  p_step "modify$r" modify "$r" || break
done
p_step "server-alive" alive
p_stop "$spid" 10
p_end
