#!/usr/bin/env bash
# gRPC (Python) over an AF_UNIX socket, ZCSOCK_LOCAL_UNIX=1 on both sides:
# case_grpc.sh.
GRPC_TRANSPORT=unix exec "$(dirname "$0")/case_grpc.sh" "$@"
