#!/usr/bin/env bash
# The Erlang VM (escript, erlang-base) as a gen_tcp echo server on a free
# port: an accept loop that spawns a process per connection, binary mode,
# every other connection read with {active,false} (gen_tcp:recv) and the
# rest with {active,once}; everything read is sent back.  Per round: 4
# python3 clients at once each send 4..16 MiB (half-close after the last
# byte) while reading the echo, then one client makes 200 short connections
# in a row (connect, 1 KiB, read it back, close); every byte is hashed.
# Repeated.  The VM used to segfault in erts_check_io as soon as a client
# connected when the library was loaded in the server.
# {exit_on_close, false}: with Erlang's default (true) the driver drops the
# output it still queues when it reads the peer's EOF, so an echo whose
# writes outran the reader lost its tail at the client's half-close.  That
# is the VM's own behaviour, not the library's: it happens without the
# library too once the kernel send buffer is small ({sndbuf, 32768} under
# load), and with the library more often because a ring (4 MiB) holds less
# than loopback TCP's autotuned buffers.  With false, gen_tcp:close waits
# for the queue to drain.
set -u
. "$(dirname "$0")/lib.sh"
p_setup erlang "$1"
p_need escript erl python3 openssl
REPS=$(p_reps 3) CLIENTS=4 SHORT=200
PY=$(python3 -c 'import sys; print(sys.executable)') || p_die "no python3"

cat >"$P_TMP/echo.erl" <<'EOF'
#!/usr/bin/env escript
%%! -noshell
main([PortS]) ->
    Port = list_to_integer(PortS),
    {ok, L} = gen_tcp:listen(Port, [binary, {packet, raw}, {active, false},
                                    {ip, {127,0,0,1}}, {reuseaddr, true},
                                    {backlog, 256}, {exit_on_close, false}]),
    io:format("listening on ~p~n", [Port]),
    accept(L, 0).

accept(L, N) ->
    case gen_tcp:accept(L) of
        {ok, S} ->
            Mode = case N rem 2 of 0 -> passive; 1 -> once end,
            Pid = spawn(fun() -> receive go -> conn(S, Mode) end end),
            ok = gen_tcp:controlling_process(S, Pid),
            Pid ! go,
            accept(L, N + 1);
        {error, E} ->
            io:format("accept: ~p~n", [E]),
            halt(3)
    end.

conn(S, passive) -> passive(S);
conn(S, once) -> ok = inet:setopts(S, [{active, once}]), once(S).

passive(S) ->
    case gen_tcp:recv(S, 0, 60000) of
        {ok, Data} ->
            case gen_tcp:send(S, Data) of
                ok -> passive(S);
                {error, E} -> io:format("send: ~p~n", [E]), gen_tcp:close(S)
            end;
        {error, closed} -> gen_tcp:close(S);
        {error, E} -> io:format("recv: ~p~n", [E]), gen_tcp:close(S)
    end.

once(S) ->
    receive
        {tcp, S, Data} ->
            case gen_tcp:send(S, Data) of
                ok -> ok = inet:setopts(S, [{active, once}]), once(S);
                {error, E} -> io:format("send: ~p~n", [E]), gen_tcp:close(S)
            end;
        {tcp_closed, S} -> gen_tcp:close(S);
        {tcp_error, S, E} -> io:format("tcp_error: ~p~n", [E]), gen_tcp:close(S)
    after 60000 ->
        io:format("idle connection~n"), gen_tcp:close(S)
    end.
EOF

# bulk.py PORT IN OUT: send IN (a thread), half-close, write the echo to OUT
cat >"$P_TMP/bulk.py" <<'EOF'
import socket, sys, threading
port, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
err = []
def send():
    try:
        for off in range(0, len(data), 65536):
            s.sendall(data[off:off + 65536])
        s.shutdown(socket.SHUT_WR)
    except Exception as e:
        err.append(e)
t = threading.Thread(target=send); t.start()
with open(dst, "wb") as f:
    while True:
        b = s.recv(262144)
        if not b:
            break
        f.write(b)
t.join()
s.close()
if err:
    sys.exit("send: %r" % err[0])
EOF
# short.py PORT IN OUT N: N connections, each sends its 1 KiB of IN, reads
# it back, closes; the echoes go to OUT in order
cat >"$P_TMP/short.py" <<'EOF'
import socket, sys
port, src, dst, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
data = open(src, "rb").read()
with open(dst, "wb") as f:
    for i in range(n):
        chunk = data[i * 1024:(i + 1) * 1024]
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(chunk)
        got = b""
        while len(got) < len(chunk):
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.close()
        f.write(got)
        if len(got) != len(chunk):
            sys.exit("connection %d: %d of %d bytes came back" % (i, len(got), len(chunk)))
EOF

port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/server.log" p_srv escript "$P_TMP/echo.erl" "$port"
spid=$P_LAST_PID
p_wait_listen "$port" 30 || p_die "erlang never listened: $(tail -3 "$P_ART/server.log")"

bulk() {
  local r=$1 i pids=() rc=0 t0=$SECONDS
  for ((i = 1; i <= CLIENTS; i++)); do
    p_gen "erl$r.$i" $(((4 + (i * 5 + r * 3) % 13) << 20)) >"$P_TMP/in$i"
  done
  for ((i = 1; i <= CLIENTS; i++)); do
    p_cli timeout -k 2 90 "$PY" "$P_TMP/bulk.py" "$port" "$P_TMP/in$i" "$P_TMP/out$i" 2>>"$P_ART/client.log" &
    pids+=($!); P_PIDS+=($!)
  done
  for ((i = 1; i <= CLIENTS; i++)); do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 60)))" || { p_say "round $r client $i exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
    p_same "round $r client $i ($(stat -c %s "$P_TMP/in$i") B)" "$(p_sha256 "$P_TMP/in$i")" "$(p_sha256 "$P_TMP/out$i")" || rc=1
  done
  return $rc
}
short() {
  local r=$1 rc=0
  p_gen "erlshort$r" $((SHORT * 1024)) >"$P_TMP/sin"
  : >"$P_TMP/sout"
  p_t 60 p_cli timeout -k 2 90 "$PY" "$P_TMP/short.py" "$port" "$P_TMP/sin" "$P_TMP/sout" "$SHORT" 2>>"$P_ART/client.log" ||
    { p_say "round $r short connections exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
  p_same "round $r $SHORT short connections" "$(p_sha256 "$P_TMP/sin")" "$(p_sha256 "$P_TMP/sout")" || rc=1
  return $rc
}
alive() { p_alive "$spid" || { p_say "the Erlang VM died: $(tail -3 "$P_ART/server.log")"; return 1; }; }
for ((r = 1; r <= REPS; r++)); do
  p_step "bulk$r" bulk "$r" || break
  p_step "short$r" short "$r" || break
done
p_step "server-alive" alive
p_stop "$spid" 5
p_end
