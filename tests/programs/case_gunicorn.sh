#!/usr/bin/env bash
# A Python web server on a free port, the app of our own (PYWEB=gunicorn:
# gunicorn, 3 sync workers forked from the master that listens, wsgi_app.py;
# PYWEB=uvicorn: uvicorn --workers 2, asgi_app.py, workers started with exec
# (multiprocessing spawn) that inherit the listener): a 1 KiB page by curl,
# ab (2,000 requests, 8 at once) on it, four concurrent downloads of a
# 16 MiB file (two streamed in 64 KiB pieces, two through the server's
# file wrapper: gunicorn's sendfile), two concurrent 16 MiB POSTs whose
# sha256 the app computes.  Repeated.  An earlier library declined a third
# of gunicorn's client connections (local.declined.not_zcsock), and with
# uvicorn --workers 2 nothing paired over TCP.
set -u
. "$(dirname "$0")/lib.sh"
PYWEB=${PYWEB:-gunicorn}
p_setup "$PYWEB" "$1"
p_need curl ab openssl
PY=/usr/bin/python3
[ -x $PY ] || { echo "skip: no /usr/bin/python3"; exit 77; }
case $PYWEB in
  gunicorn) p_need gunicorn ;;
  uvicorn) $PY -c 'import uvicorn' 2>/dev/null || { echo "skip: python3-uvicorn not installed"; exit 77; } ;;
  *) p_die "PYWEB must be gunicorn or uvicorn" ;;
esac

REPS=$(p_reps 3) BIG=$((16 << 20))
p_gen pyweb "$BIG" >"$P_TMP/file"
p_gen pyup "$BIG" >"$P_TMP/up"
BIG_SHA=$(p_sha256 "$P_TMP/file") UP_SHA=$(p_sha256 "$P_TMP/up")
SMALL_SHA=$($PY -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) & 0xFF for i in range(1024)))' | p_sha256)
port=$(p_free_port) || p_die "no free port"
app_env=(PYTHONDONTWRITEBYTECODE=1 "ZC_APP_FILE=$P_TMP/file")
case $PYWEB in
  gunicorn) p_bg "$P_ART/server.log" p_srv "${app_env[@]}" gunicorn --workers 3 --worker-class sync \
              --bind "127.0.0.1:$port" --chdir "$P_DIR" --timeout 60 --graceful-timeout 3 \
              --log-level warning wsgi_app:app ;;
  uvicorn) p_bg "$P_ART/server.log" p_srv "${app_env[@]}" $PY -m uvicorn --workers 2 --host 127.0.0.1 \
             --port "$port" --app-dir "$P_DIR" --log-level warning --no-access-log asgi_app:app ;;
esac
spid=$P_LAST_PID
p_wait_listen "$port" 30 || p_die "$PYWEB never listened: $(tail -n 5 "$P_ART/server.log")"
url=http://127.0.0.1:$port
# uvicorn's workers start after the listener: wait until one answers
for ((i = 0; i < 100; i++)); do
  curl -s -o /dev/null --max-time 2 "$url/small" && break
  p_nap 0.2
done

c() { p_t 90 p_cli curl -sS -f --max-time 80 "$@"; }
small() { p_same "1 KiB page" "$SMALL_SHA" "$(c "$url/small" 2>"$P_TMP/s.err" | p_sha256)" || { p_say "curl: $(tail -n 1 "$P_TMP/s.err")"; return 1; }; }
abrun() { p_ab 90 2000 "$url/small"; }   # every request complete and whole
downloads() { p_par_get 4 "$BIG_SHA" "$url/file" "$url/file" "$url/sendfile" "$url/sendfile"; }
uploads() { p_par_post 2 "$P_TMP/up" "$UP_SHA" "$url/sum"; }
for ((r = 1; r <= REPS; r++)); do
  p_step "small$r" small || break
  p_step "ab$r" abrun || break
  p_step "downloads$r" downloads || break
  p_step "uploads$r" uploads || break
done
p_stop "$spid" 8
p_end
