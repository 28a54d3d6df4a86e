#!/usr/bin/env bash
# PostgreSQL: initdb into a temp dir as the postgres user (runuser), the
# server on a free port of 127.0.0.1 (trust authentication), clients as the
# same user (pairing needs one user): pgbench -i and a 4-client run, then
# COPY of 150k rows (about 17 MiB of CSV) in and out; what COPY TO gives
# must be byte-identical to what COPY FROM read.  Repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup postgres "$1"
p_need runuser openssl
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ] || { echo "skip: postgresql not installed"; exit 77; }
[ "$(id -u)" -eq 0 ] && id postgres >/dev/null 2>&1 || { echo "skip: needs root and a postgres user"; exit 77; }
REPS=$(p_reps 2)
D=$P_TMP/pg; mkdir -p "$D"; chown postgres: "$D"
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$PGBIN/initdb" -D "$D/data" --auth=trust -U postgres -E UTF8 --locale=C.UTF-8 >"$P_ART/initdb.log" 2>&1 || p_die "initdb: $(tail -3 "$P_ART/initdb.log")"
port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/server.log" runuser -u postgres -- env "${P_SRV_ENV[@]}" "$PGBIN/postgres" -D "$D/data" -p "$port" \
  -c listen_addresses=127.0.0.1 -c unix_socket_directories="$D" -c fsync=off -c logging_collector=off
ppid_=$P_LAST_PID
p_wait_listen "$port" 20 || p_die "postgres never listened: $(tail -3 "$P_ART/server.log")"
cli() { p_t 60 runuser -u postgres -- env "${P_CLI_ENV[@]}" "$@"; }
PSQL=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
bench() {
  cli "$PGBIN/pgbench" -h 127.0.0.1 -p "$port" -U postgres -i -s 2 -q postgres >>"$P_ART/pgbench.log" 2>&1 || { p_say "pgbench -i exited $?"; return 1; }
  cli "$PGBIN/pgbench" -h 127.0.0.1 -p "$port" -U postgres -c 4 -j 2 -t 250 -n postgres >"$P_TMP/pgb" 2>&1; local rc=$?
  cat "$P_TMP/pgb" >>"$P_ART/pgbench.log"
  grep -q 'number of transactions actually processed: 1000/1000' "$P_TMP/pgb" || { p_say "pgbench exited $rc: $(grep -m2 -i 'error\|processed' "$P_TMP/pgb")"; return 1; }
}
copy() {
  local r=$1
  p_gen "pg$r" $((9 << 20)) | od -An -v -tx1 | tr -d ' ' | head -n 150000 | awk '{ printf "%d,%s\n", NR, $0 }' >"$D/in.csv"
  chown postgres: "$D/in.csv"
  cli "${PSQL[@]}" -c "drop table if exists t; create table t (id int primary key, v text)" postgres >>"$P_ART/psql.log" 2>&1 &&
  cli "${PSQL[@]}" -c "\\copy t from '$D/in.csv' csv" postgres >>"$P_ART/psql.log" 2>&1 &&
  cli "${PSQL[@]}" -c "\\copy (select * from t order by id) to '$D/out.csv' csv" postgres >>"$P_ART/psql.log" 2>&1 ||
    { p_say "psql exited $?: $(tail -2 "$P_ART/psql.log")"; return 1; }
  p_same "COPY round $r" "$(p_sha256 "$D/in.csv")" "$(p_sha256 "$D/out.csv")"
}
for ((r = 1; r <= REPS; r++)); do
  p_step "pgbench$r" bench || break
  p_step "copy$r" copy "$r" || break
done
p_stop "$ppid_" 10
p_end
