#!/usr/bin/env bash
# The standard library's socket servers and protocols: see case_cpython.sh.
exec "$(dirname "$0")/case_cpython.sh" net
