#!/usr/bin/env bash
# Node.js cluster: the primary accepts and hands each connection to one of
# 2 workers (SCHED_RR, passed over the IPC channel with SCM_RIGHTS); the
# node_http workload against it.
export NODE_CASE=node_cluster CLUSTER=2 NODE_REPS=3
exec "$(dirname "$0")/case_node_http.sh" "$@"
