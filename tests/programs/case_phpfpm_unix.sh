#!/usr/bin/env bash
# PHP-FPM behind nginx, the pool on a unix socket (ZCSOCK_LOCAL_UNIX=1 on the server side): case_phpfpm.sh.
FPM_LISTEN=unix exec "$(dirname "$0")/case_phpfpm.sh" "$@"
