#!/usr/bin/env bash
# Apache httpd with the event MPM (Debian's default): case_apache.sh.
APACHE_MPM=event exec "$(dirname "$0")/case_apache.sh" "$@"
