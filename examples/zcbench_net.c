/* zcbench sockets: listen, accept and connect with timeouts for TCP over
 * IPv4/IPv6 and AF_UNIX stream, full-length send/receive, the ack message
 * and CPU pinning.  Errors are reported here, where they are detected, with
 * zb_err(); callers only propagate -1.
 */
#include "zcbench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef union zb_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in in4;
  struct sockaddr_in6 in6;
  struct sockaddr_un un;
} zb_sockaddr_t;

static int zb_family(int transport)
{
  return transport == ZB_TCP6 ? AF_INET6 : transport == ZB_UNIX ? AF_UNIX : AF_INET;
}

/* Fill *sa for addr; returns its length, or -1 after reporting. */
static int zb_sockaddr_make(const zb_addr_t *addr, zb_sockaddr_t *sa)
{
  memset(sa, 0, sizeof(*sa));
  if (addr->transport == ZB_UNIX) {
    size_t n = strlen(addr->path);
    sa->un.sun_family = AF_UNIX;
    if (n == 0 || n >= sizeof(sa->un.sun_path)) {
      zb_err("unix socket path '%s' is empty or too long", addr->path);
      return -1;
    }
    memcpy(sa->un.sun_path, addr->path, n);
    if (addr->path[0] == '@') {               /* abstract namespace */
      sa->un.sun_path[0] = '\0';
      return (int)(offsetof(struct sockaddr_un, sun_path) + n);
    }
    return (int)sizeof(sa->un);
  }
  if (addr->transport == ZB_TCP6) {
    const char *host = addr->host ? addr->host : "::1";
    sa->in6.sin6_family = AF_INET6;
    sa->in6.sin6_port = htons((uint16_t)addr->port);
    if (inet_pton(AF_INET6, host, &sa->in6.sin6_addr) != 1) {
      zb_err("'%s' is not an IPv6 address", host);
      return -1;
    }
    return (int)sizeof(sa->in6);
  }
  const char *host = addr->host ? addr->host : "127.0.0.1";
  sa->in4.sin_family = AF_INET;
  sa->in4.sin_port = htons((uint16_t)addr->port);
  if (inet_pton(AF_INET, host, &sa->in4.sin_addr) != 1) {
    zb_err("'%s' is not an IPv4 address", host);
    return -1;
  }
  return (int)sizeof(sa->in4);
}

static int zb_io_timeout_set(int fd, double secs)
{
  struct timeval tv = { .tv_sec = (time_t)secs,
                        .tv_usec = (suseconds_t)((secs - (double)(time_t)secs) * 1e6) };
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
    zb_err("setsockopt(SO_RCVTIMEO/SO_SNDTIMEO): %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* Pick a temporary AF_UNIX path when addr has none. */
void zb_unix_path_default(zb_addr_t *addr)
{
  static unsigned seq;
  const char *dir = getenv("TMPDIR");
  if (addr->path[0])
    return;
  if (!dir || !*dir || strlen(dir) > 60)
    dir = "/tmp";
  snprintf(addr->path, sizeof(addr->path), "%s/zcbench-%d-%u.sock", dir,
           (int)getpid(), seq++);
}

/* Open a listening socket for addr.  Port 0 picks an ephemeral port, written
 * back to addr->port; an empty AF_UNIX path picks a temporary one, written
 * back to addr->path.  A stale socket file at the path is replaced.
 * Returns the fd, or -1 after reporting. */
int zb_listen_open(zb_addr_t *addr)
{
  zb_sockaddr_t sa;
  int one = 1, fd, len;

  if (addr->transport == ZB_UNIX) {
    struct stat st;
    zb_unix_path_default(addr);
    if (addr->path[0] != '@' && stat(addr->path, &st) == 0 && S_ISSOCK(st.st_mode))
      unlink(addr->path);
  }
  len = zb_sockaddr_make(addr, &sa);
  if (len < 0)
    return -1;
  fd = socket(zb_family(addr->transport), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    zb_err("socket(%s): %s", zb_transport_name(addr->transport), strerror(errno));
    return -1;
  }
  if (addr->transport != ZB_UNIX)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, &sa.sa, (socklen_t)len) < 0 || listen(fd, 16) < 0) {
    zb_err("bind/listen on %s %s%s%d: %s", zb_transport_name(addr->transport),
           addr->transport == ZB_UNIX ? addr->path : "",
           addr->transport == ZB_UNIX ? "" : "port ",
           addr->transport == ZB_UNIX ? 0 : addr->port, strerror(errno));
    close(fd);
    return -1;
  }
  if (addr->transport != ZB_UNIX) {
    socklen_t sl = sizeof(sa);
    if (getsockname(fd, &sa.sa, &sl) == 0)
      addr->port = ntohs(addr->transport == ZB_TCP6 ? sa.in6.sin6_port : sa.in4.sin_port);
  }
  return fd;
}

/* Wait up to timeout seconds for a connection on any of the n listening
 * sockets lfds and accept it.  The new socket gets the I/O timeouts.
 * Returns the fd, or -1 after reporting. */
int zb_accept_wait(const int *lfds, int n, const zb_opts_t *o, double timeout)
{
  struct pollfd pfd[ZB_NTRANSPORTS];
  uint64_t end = zb_now_ns() + (uint64_t)(timeout * 1e9);

  for (int i = 0; i < n && i < ZB_NTRANSPORTS; i++)
    pfd[i] = (struct pollfd){ .fd = lfds[i], .events = POLLIN };
  for (int tries = 0; tries < 1000; tries++) {
    uint64_t now = zb_now_ns();
    int ms = now >= end ? 0 : (int)((end - now) / 1000000u) + 1;
    int r = poll(pfd, (nfds_t)n, ms);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      zb_err("poll on the listening sockets: %s", strerror(errno));
      return -1;
    }
    if (r == 0) {
      zb_err("no connection within %.1f s (accept timed out)", timeout);
      return -1;
    }
    for (int i = 0; i < n; i++) {
      if (!(pfd[i].revents & POLLIN))
        continue;
      int fd = accept4(pfd[i].fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0)
        return zb_io_timeout_set(fd, o->timeout) < 0 ? (close(fd), -1) : fd;
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        zb_err("accept: %s", strerror(errno));
        return -1;
      }
    }
  }
  zb_err("accept: too many interrupted attempts");
  return -1;
}

/* One non-blocking connect attempt bounded by the time left until end_ns.
 * Returns the fd, -1 after reporting a hard error, or -2 with errno when
 * the caller may retry (server not there yet). */
static int zb_connect_try(const zb_addr_t *addr, const zb_sockaddr_t *sa, int len,
                          uint64_t end_ns)
{
  int fd = socket(zb_family(addr->transport), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err = 0;
  socklen_t el = sizeof(err);

  if (fd < 0) {
    zb_err("socket(%s): %s", zb_transport_name(addr->transport), strerror(errno));
    return -1;
  }
  if (connect(fd, &sa->sa, (socklen_t)len) < 0) {
    if (errno != EINPROGRESS) {
      err = errno;
      goto out_err;
    }
    uint64_t now = zb_now_ns();
    struct pollfd pfd = { .fd = fd, .events = POLLOUT };
    int ms = now >= end_ns ? 1 : (int)((end_ns - now) / 1000000u) + 1;
    int r = poll(&pfd, 1, ms);
    if (r <= 0) {
      err = r == 0 ? ETIMEDOUT : errno;
      goto out_err;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
      err = errno;
    if (err)
      goto out_err;
  }
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
    err = errno;
    goto out_err;
  }
  return fd;
out_err:
  close(fd);
  errno = err;
  if (err == ECONNREFUSED || err == ENOENT || err == EAGAIN || err == EINTR)
    return -2;
  return -1;
}

/* Connect to addr, retrying while the server is not listening yet, for at
 * most o->timeout seconds.  The socket is blocking and has the I/O timeouts.
 * Returns the fd, or -1 after reporting. */
int zb_connect_open(const zb_addr_t *addr, const zb_opts_t *o)
{
  zb_sockaddr_t sa;
  int len = zb_sockaddr_make(addr, &sa);
  uint64_t end = zb_now_ns() + (uint64_t)(o->timeout * 1e9);
  int fd = -1;

  if (len < 0)
    return -1;
  for (int tries = 0; tries < 100000; tries++) {
    fd = zb_connect_try(addr, &sa, len, end);
    if (fd != -2 || zb_now_ns() >= end)
      break;
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
  if (fd < 0) {
    zb_err("connect to %s %s%s: %s", zb_transport_name(addr->transport),
           addr->transport == ZB_UNIX ? addr->path : (addr->host ? addr->host : "loopback"),
           addr->transport == ZB_UNIX ? "" : " (see --host/--port)", strerror(errno));
    return -1;
  }
  if (zb_io_timeout_set(fd, o->timeout) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Send all len bytes.  Returns 0, or -1 with errno (ETIMEDOUT when the peer
 * stopped reading for longer than the I/O timeout). */
int zb_send_full(int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        errno = ETIMEDOUT;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Receive exactly len bytes.  Returns len, 0 on end of stream before the
 * first byte, or -1 with errno (EPROTO on end of stream inside the message,
 * ETIMEDOUT on a stalled peer). */
long zb_recv_full(int fd, void *buf, size_t len)
{
  char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(fd, p + got, len - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        errno = ETIMEDOUT;
      return -1;
    }
    if (n == 0) {
      if (got == 0)
        return 0;
      errno = EPROTO;
      return -1;
    }
    got += (size_t)n;
  }
  return (long)got;
}

int zb_ack_send(int fd, zb_ack_t *ack)
{
  ack->magic = ZB_ACK_MAGIC;
  ack->zcsock = (uint32_t)zb_zcsock_active();
  if (zb_send_full(fd, ack, sizeof(*ack)) < 0) {
    zb_err("sending the final ack: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* Read the server's ack.  Returns 0, or -1 after reporting. */
int zb_ack_recv(int fd, zb_ack_t *ack)
{
  long r = zb_recv_full(fd, ack, sizeof(*ack));
  if (r <= 0) {
    zb_err("waiting for the server's ack: %s",
           r == 0 ? "connection closed by the server" : strerror(errno));
    return -1;
  }
  if (ack->magic != ZB_ACK_MAGIC) {
    zb_err("bad ack from the server (magic %#x): not a zcbench server?", ack->magic);
    return -1;
  }
  return 0;
}

/* Remove the AF_UNIX socket file a server created (not abstract names). */
void zb_unix_cleanup(const zb_addr_t *addr)
{
  if (addr->transport == ZB_UNIX && addr->path[0] && addr->path[0] != '@')
    unlink(addr->path);
}

/* Pin the calling process to one CPU.  Returns 0, or -1 after reporting. */
int zb_cpu_pin(int cpu)
{
  cpu_set_t set;
  if (cpu < 0)
    return 0;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) < 0) {
    zb_err("cannot pin to cpu %d: %s", cpu, strerror(errno));
    return -1;
  }
  return 0;
}

/* Latency runs want every small message on the wire at once: TCP_NODELAY
 * on TCP sockets, nothing on AF_UNIX.  Returns 0, or -1 after reporting. */
int zb_nodelay_set(int fd)
{
  int one = 1, dom = 0;
  socklen_t dl = sizeof(dom);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0 || dom == AF_UNIX)
    return 0;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
    zb_err("setsockopt(TCP_NODELAY): %s", strerror(errno));
    return -1;
  }
  return 0;
}
