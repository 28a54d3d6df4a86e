#!/usr/bin/env bash
# PHP-FPM behind nginx, the pool on 127.0.0.1:PORT: case_phpfpm.sh.
FPM_LISTEN=tcp exec "$(dirname "$0")/case_phpfpm.sh" "$@"
