#!/bin/sh
# The "ssh" of a job across two hosts that are network namespaces on this
# machine (tests/mpihosts/run.sh): [-options] HOST COMMAND.. runs COMMAND
# through sh in HOST's namespace, with a clean environment as ssh would
# give it (so what reaches the remote ranks is what the MPI forwards).
# ZC_NSMAP="ADDR=NAMESPACE ..." maps each host address to its namespace.
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
ns=
for m in $ZC_NSMAP; do
  [ "${m%%=*}" = "$host" ] && ns=${m#*=}
done
[ -n "$ns" ] || { echo "nsexec: no namespace for host $host" >&2; exit 255; }
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="${HOME:-/}" \
  ip netns exec "$ns" sh -c "$*"
