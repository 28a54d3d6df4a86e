#!/usr/bin/env bash
# Apache httpd with the prefork MPM: case_apache.sh.
APACHE_MPM=prefork exec "$(dirname "$0")/case_apache.sh" "$@"
