#!/usr/bin/env bash
# Install every Debian package zcsock needs to build, test and benchmark.
# Used by the README's commands and by .ci/run. Idempotent; needs root or sudo.
set -euo pipefail

PKGS=(
  # build
  build-essential pkg-config
  liburing-dev uthash-dev libcmocka-dev
  # sanitizer and fuzzer runtimes
  clang libclang-rt-14-dev
  # tests: real programs run with and without the library
  python3 libpython3.11-testsuite socat nginx-light curl procps iproute2 psmisc
  openssl redis-server redis-tools
  # tests/programs: real daemons and clients with the library on both ends
  nodejs mosquitto mosquitto-clients openssh-server openssh-client git rsync
  openbsd-inetd postgresql memcached liburing-dev strace
  # tests/programs, round two (issue 29): servers that crashed or stalled
  apache2 apache2-utils erlang-base vsftpd python3-grpcio ncat haproxy
  varnish dovecot-imapd slapd ldap-utils php-fpm gunicorn python3-uvicorn
  # MPI over TCP (tests/programs mpi_* cases, make bench): Open MPI and MPICH
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  # malloc-hooks: a foreign allocator to detect (falls back to events only)
  libjemalloc2
  # benchmark: plot, HTTP load generator for the nginx figure
  gnuplot-nox wrk
  # make bench-mpi: NetPIPE over each MPI
  netpipe-openmpi netpipe-mpich2
)

SUDO=
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Daemons the tests start themselves (postgresql, openssh-server, inetd,
# memcached, mosquitto, redis, nginx, apache2, haproxy, varnish, dovecot,
# slapd, php-fpm, vsftpd) must not be started by their package
# scripts: in a container without an init system that fails the install.
rc_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  rc_policy=1
fi
rc=0
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
[ -z "$rc_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
exit $rc
