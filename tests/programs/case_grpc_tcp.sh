#!/usr/bin/env bash
# gRPC (Python) over TCP on 127.0.0.1: case_grpc.sh.
GRPC_TRANSPORT=tcp exec "$(dirname "$0")/case_grpc.sh" "$@"
