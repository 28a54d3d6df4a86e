#!/usr/bin/env bash
# ncat (nmap's) as an echo relay: two listeners with --keep-open; each
# connection gets a forked ncat that relays between the socket and a
# command's pipes in 8 KiB pieces, with blocking writes.  Listener 1:
# --sh-exec 'read n && exec head -c "$n"' (a shell per connection; the
# command echoes the n bytes announced on the first line and exits, so
# SIGCHLD reaches the relay while it still sends the last pieces).
# Listener 2: --exec /bin/cat (the client closes once it has its bytes
# back).  Per round and listener, 10 python3 clients (5 at a time) each
# send 4..12 MiB and must read back every byte (sha256; from the head relay
# nothing more before its EOF).  The clients keep at most 32 KiB in flight
# and do not half-close: ncat's relay blocks writing to the command while
# the command blocks writing to the relay once both pipes fill, and it ends
# the connection at the socket's EOF without draining the command.
# Repeated.  Under an earlier library a blocking send in the relay process
# returned short when SIGCHLD arrived and ncat lost bytes (4 of 10 runs
# with both ends preloaded): hence many connections per round.
set -u
. "$(dirname "$0")/lib.sh"
p_setup ncat "$1"
p_need ncat python3 openssl
REPS=$(p_reps 3) CONNS=10 AT_ONCE=5
PY=$(python3 -c 'import sys; print(sys.executable)') || p_die "no python3"

# echo.py PORT IN OUT HEADER: send IN (first "<size>\n" when HEADER is 1),
# at most 32 KiB ahead of what came back, and write what comes back to OUT;
# with HEADER read on to the server's EOF, else close once all is back
cat >"$P_TMP/echo.py" <<'EOF'
import select, socket, sys, time
port, src, dst, header = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1"
data = open(src, "rb").read()
n, window, deadline = len(data), 32768, time.monotonic() + 50
s = socket.create_connection(("127.0.0.1", port), timeout=20)
if header:
    s.sendall(b"%d\n" % n)
s.setblocking(False)
sent, got, eof = 0, 0, False
with open(dst, "wb") as f:
    while not eof and (header or got < n):
        left = deadline - time.monotonic()
        if left <= 0:
            sys.exit("timed out: sent %d, got %d of %d" % (sent, got, n))
        want_w = sent < n and sent - got < window
        r, w, _ = select.select([s], [s] if want_w else [], [], min(left, 1))
        if w:
            sent += s.send(data[sent:min(n, got + window)])
        if r:
            b = s.recv(262144)
            if not b:
                eof = True
            f.write(b)
            got += len(b)
s.close()
if got != n:
    sys.exit("sent %d, got %d of %d%s" % (sent, got, n, " (EOF)" if eof else ""))
EOF

p1=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/sh-exec.log" p_srv ncat -n -l 127.0.0.1 "$p1" --keep-open --sh-exec 'read n && exec head -c "$n"'
spid1=$P_LAST_PID
p2=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/exec.log" p_srv ncat -n -l 127.0.0.1 "$p2" --keep-open --exec /bin/cat
spid2=$P_LAST_PID
p_wait_listen "$p1" 10 && p_wait_listen "$p2" 10 ||
  p_die "ncat never listened: $(tail -2 "$P_ART/sh-exec.log" "$P_ART/exec.log")"

# round R PORT WHAT HEADER: CONNS clients, AT_ONCE at a time
round() {
  local r=$1 port=$2 what=$3 hdr=$4 i j n pids rc=0 t0
  for ((i = 1; i <= CONNS; i++)); do p_gen "$what$r.$i" $(((4 + (i * 3 + r) % 9) << 20)) >"$P_TMP/in$i"; done
  for ((i = 1; i <= CONNS; i += AT_ONCE)); do
    pids=() t0=$SECONDS
    for ((j = i; j < i + AT_ONCE && j <= CONNS; j++)); do
      p_cli timeout -k 2 60 "$PY" "$P_TMP/echo.py" "$port" "$P_TMP/in$j" "$P_TMP/out$j" "$hdr" 2>>"$P_ART/client.log" &
      pids+=($!); P_PIDS+=($!)
    done
    for ((j = i, n = 0; j < i + AT_ONCE && j <= CONNS; j++, n++)); do
      p_wait "${pids[n]}" "$(p_left $((t0 + 55)))" || { p_say "round $r $what client $j exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
      p_same "round $r $what client $j ($(stat -c %s "$P_TMP/in$j") B, got $(stat -c %s "$P_TMP/out$j"))" \
        "$(p_sha256 "$P_TMP/in$j")" "$(p_sha256 "$P_TMP/out$j")" || rc=1
    done
  done
  return $rc
}
alive() {
  p_alive "$spid1" && p_alive "$spid2" || { p_say "an ncat listener died: $(tail -2 "$P_ART/sh-exec.log" "$P_ART/exec.log")"; return 1; }
}
for ((r = 1; r <= REPS; r++)); do
  p_step "sh-exec$r" round "$r" "$p1" sh-exec 1 || break
  p_step "exec$r" round "$r" "$p2" exec 0 || break
done
p_step "listeners-alive" alive
p_stop "$spid1" 5
p_stop "$spid2" 5
p_end
