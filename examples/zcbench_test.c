/* zcbench tests: message buffers (page-aligned or not, reused or fresh for
 * every message), the validation pattern, and both ends of the streaming
 * and ping-pong tests.
 *
 * Streaming: the client sends messages of one size for the time limit, shuts
 * down its sending side and waits for the server's ack, which carries the
 * byte count the server received; throughput is those bytes over the
 * client's time from the first send to the ack, so it covers delivery.
 * Ping-pong: the client sends one message, the server reads all of it and
 * echoes it back; each round trip is timed on the client.
 * Validation: byte o of a stream is a fixed function of o; the receiver of
 * every byte checks it and reports the first mismatching offset.
 */
#include "zcbench.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct zb_buf {
  char *base;        /* current allocation */
  char *p;           /* message start inside it */
  uint32_t size;
  int unaligned, fresh;
} zb_buf_t;

/* ---- buffers ---- */

static char *zb_buf_alloc(zb_buf_t *b)
{
  void *m = NULL;
  size_t off = b->unaligned ? ZB_UNALIGN_OFF : 0;
  if (posix_memalign(&m, ZB_PAGE, b->size + off) != 0)
    return NULL;
  b->base = m;
  b->p = (char *)m + off;
  return b->p;
}

/* Prepare b; a reused buffer is allocated and touched now.  Returns 0, or
 * -1 after reporting. */
static int zb_buf_init(zb_buf_t *b, uint32_t size, uint32_t flags)
{
  memset(b, 0, sizeof(*b));
  b->size = size;
  b->unaligned = !!(flags & ZB_F_UNALIGNED);
  b->fresh = !!(flags & ZB_F_FRESH);
  if (b->fresh)
    return 0;
  if (!zb_buf_alloc(b)) {
    zb_err("cannot allocate a %u-byte buffer", size);
    return -1;
  }
  memset(b->p, 0, size);
  return 0;
}

/* The buffer for the next message: the reused one, or a new allocation. */
static char *zb_buf_get(zb_buf_t *b)
{
  if (!b->fresh)
    return b->p;
  if (!zb_buf_alloc(b))
    zb_err("cannot allocate a %u-byte buffer", b->size);
  return b->p;
}

/* Done with the current message: fresh buffers are freed. */
static void zb_buf_put(zb_buf_t *b)
{
  if (b->fresh) {
    free(b->base);
    b->base = b->p = NULL;
  }
}

static void zb_buf_fini(zb_buf_t *b)
{
  free(b->base);
  b->base = b->p = NULL;
}

/* ---- validation pattern ---- */

static inline uint64_t zb_mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static inline uint8_t zb_pattern_byte(uint64_t off)
{
  return (uint8_t)(zb_mix(off >> 3) >> ((off & 7) * 8));
}

/* Write the pattern for stream offsets [off, off+len) into p. */
static void zb_pattern_fill(char *p, size_t len, uint64_t off)
{
  while (len > 0 && (off & 7)) {
    *p++ = (char)zb_pattern_byte(off++);
    len--;
  }
  for (; len >= 8; len -= 8, off += 8, p += 8) {
    uint64_t w = htole64(zb_mix(off >> 3));
    memcpy(p, &w, 8);
  }
  while (len > 0) {
    *p++ = (char)zb_pattern_byte(off++);
    len--;
  }
}

/* Index of the first byte of p that differs from the pattern at stream
 * offset off, or -1 when all len bytes match. */
static long zb_pattern_check(const char *p, size_t len, uint64_t off)
{
  size_t i = 0;
  while (i < len && ((off + i) & 7)) {
    if ((uint8_t)p[i] != zb_pattern_byte(off + i))
      return (long)i;
    i++;
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w = htole64(zb_mix((off + i) >> 3)), g;
    memcpy(&g, p + i, 8);
    if (g != w)
      break;
  }
  for (; i < len; i++)
    if ((uint8_t)p[i] != zb_pattern_byte(off + i))
      return (long)i;
  return -1;
}

static void zb_mismatch_report(const char *who, const char *test, uint32_t size,
                               uint64_t off, uint8_t got)
{
  char sz[32];
  zb_size_format(size, sz, sizeof(sz));
  zb_err("VALIDATION FAILED (%s, %s, size %s): byte at stream offset %llu is 0x%02x, "
         "expected 0x%02x", who, test, sz, (unsigned long long)off, got,
         zb_pattern_byte(off));
}

/* --corrupt: flip the byte at stream offset o->corrupt_at if it falls in
 * this message, so that tests can see --validate fail. */
static void zb_corrupt(const zb_opts_t *o, char *p, size_t len, uint64_t off)
{
  if (o->corrupt_at >= off && o->corrupt_at - off < len)
    p[o->corrupt_at - off] ^= (char)0xff;
}

/* ---- server side ---- */

/* Read and discard until end of stream or end_ns, so that the client can
 * finish sending and read the ack after a failure. */
static void zb_drain(int fd, uint64_t end_ns)
{
  static char sink[65536];
  for (int i = 0; i < 1000000 && zb_now_ns() < end_ns; i++)
    if (recv(fd, sink, sizeof(sink), 0) <= 0 && errno != EINTR)
      break;
}

static int zb_stream_serve(int fd, const zb_hdr_t *h, zb_ack_t *ack)
{
  zb_buf_t b;
  uint64_t t0, end, off = 0, msgs = 0;
  int rc = 0;

  if (zb_buf_init(&b, h->size, h->flags) < 0)
    return ack->status = ZB_ACK_ERROR, -1;
  t0 = zb_now_ns();
  end = t0 + h->limit_ns;
  for (;;) {                                   /* bounded by EOF and end */
    char *p = zb_buf_get(&b);
    if (!p)
      goto out_err;
    ssize_t n = recv(fd, p, h->size, 0);
    if (n <= 0) {
      zb_buf_put(&b);
      if (n == 0)
        break;
      if (errno == EINTR)
        continue;
      zb_err("stream receive: %s", errno == EAGAIN ? "timed out (sender stalled)" : strerror(errno));
      goto out_err;
    }
    long bad = (h->flags & ZB_F_VALIDATE) ? zb_pattern_check(p, (size_t)n, off) : -1;
    if (bad >= 0) {
      zb_mismatch_report("server", "stream", h->size, off + (uint64_t)bad, (uint8_t)p[bad]);
      zb_buf_put(&b);
      ack->status = ZB_ACK_MISMATCH;
      ack->bad_offset = off + (uint64_t)bad;
      rc = -1;
      break;
    }
    off += (uint64_t)n;
    msgs++;
    zb_buf_put(&b);
    if ((msgs & 63) == 0 && zb_now_ns() > end) {
      zb_err("stream did not end within its time limit");
      goto out_err;
    }
  }
  ack->ns = zb_now_ns() - t0;
  ack->bytes = off;
  ack->msgs = msgs;
  zb_buf_fini(&b);
  return rc;
out_err:
  ack->bytes = off;
  ack->status = ZB_ACK_ERROR;
  zb_buf_fini(&b);
  return -1;
}

static int zb_pingpong_serve(int fd, const zb_hdr_t *h, zb_ack_t *ack)
{
  zb_buf_t b;
  uint64_t t0 = zb_now_ns(), end = t0 + h->limit_ns, off = 0, msgs = 0;

  if (zb_nodelay_set(fd) < 0 || zb_buf_init(&b, h->size, h->flags) < 0)
    return ack->status = ZB_ACK_ERROR, -1;
  for (;;) {                                   /* bounded by EOF and end */
    char *p = zb_buf_get(&b);
    if (!p)
      goto out_err;
    long r = zb_recv_full(fd, p, h->size);
    if (r == 0) {
      zb_buf_put(&b);
      break;
    }
    if (r < 0) {
      zb_err("ping-pong receive: %s", strerror(errno));
      goto out_put;
    }
    long bad = (h->flags & ZB_F_VALIDATE) ? zb_pattern_check(p, h->size, off) : -1;
    if (bad >= 0) {
      zb_mismatch_report("server", "ping-pong", h->size, off + (uint64_t)bad, (uint8_t)p[bad]);
      ack->bad_offset = off + (uint64_t)bad;
      ack->status = ZB_ACK_MISMATCH;
      zb_buf_put(&b);
      zb_buf_fini(&b);
      return -1;
    }
    if (zb_send_full(fd, p, h->size) < 0) {
      zb_err("ping-pong reply: %s", strerror(errno));
      goto out_put;
    }
    zb_buf_put(&b);
    off += h->size;
    msgs++;
    if (zb_now_ns() > end) {
      zb_err("ping-pong did not end within its time limit");
      goto out_err;
    }
  }
  ack->ns = zb_now_ns() - t0;
  ack->bytes = off;
  ack->msgs = msgs;
  zb_buf_fini(&b);
  return 0;
out_put:
  zb_buf_put(&b);
out_err:
  ack->status = ZB_ACK_ERROR;
  zb_buf_fini(&b);
  return -1;
}

/* Serve one test connection: read the header, run the receiving end, send
 * the ack.  Returns 0 when served, 1 when the client asked the server to
 * quit, -1 on any failure (reported). */
int zb_serve_conn(int fd, const zb_opts_t *o)
{
  zb_hdr_t h;
  zb_ack_t ack;
  long r = zb_recv_full(fd, &h, sizeof(h));
  int rc;

  (void)o;
  if (r == 0)
    return 0;                                  /* a probe connection */
  if (r < 0) {
    zb_err("reading the test header: %s", strerror(errno));
    return -1;
  }
  if (h.magic != ZB_MAGIC) {
    zb_err("bad test header (magic %#x): not a zcbench client?", h.magic);
    return -1;
  }
  if (h.test == ZB_QUIT)
    return 1;
  if ((h.test != ZB_STREAM && h.test != ZB_PINGPONG) || h.size == 0 || h.size > ZB_MAX_SIZE) {
    zb_err("bad test header (test %u, size %u)", h.test, h.size);
    return -1;
  }
  memset(&ack, 0, sizeof(ack));
  rc = h.test == ZB_STREAM ? zb_stream_serve(fd, &h, &ack) : zb_pingpong_serve(fd, &h, &ack);
  if (zb_ack_send(fd, &ack) < 0)
    return -1;
  if (rc < 0 && h.test == ZB_STREAM)          /* let the sender reach its ack */
    zb_drain(fd, zb_now_ns() + h.limit_ns);
  return rc;
}

/* ---- client side ---- */

static int zb_test_open(const zb_addr_t *addr, const zb_opts_t *o, uint32_t test,
                        uint32_t size)
{
  zb_hdr_t h = { .magic = ZB_MAGIC, .test = test, .size = size };
  int fd = zb_connect_open(addr, o);

  if (fd < 0)
    return -1;
  h.flags = (o->unaligned ? ZB_F_UNALIGNED : 0) | (o->fresh ? ZB_F_FRESH : 0) |
            (o->validate ? ZB_F_VALIDATE : 0);
  h.limit_ns = (uint64_t)((o->seconds + 2 * o->timeout) * 1e9);
  if ((test == ZB_PINGPONG && zb_nodelay_set(fd) < 0) ||
      zb_send_full(fd, &h, sizeof(h)) < 0) {
    if (errno)
      zb_err("sending the test header: %s", strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* Shut down the sending side, read the ack and check it.  Returns 0, or -1
 * after reporting. */
static int zb_test_close(int fd, const char *test, uint32_t size, uint64_t bytes,
                         zb_ack_t *ack)
{
  int rc = -1;
  shutdown(fd, SHUT_WR);
  if (zb_ack_recv(fd, ack) < 0)
    goto out;
  if (ack->status == ZB_ACK_MISMATCH) {
    char sz[32];
    zb_size_format(size, sz, sizeof(sz));
    zb_err("VALIDATION FAILED (%s, size %s): the server received a wrong byte at stream "
           "offset %llu", test, sz, (unsigned long long)ack->bad_offset);
    goto out;
  }
  if (ack->status != ZB_ACK_OK) {
    zb_err("the server reported an error during %s (see its messages)", test);
    goto out;
  }
  if (ack->bytes != bytes) {
    zb_err("%s: the server received %llu bytes, the client sent %llu", test,
           (unsigned long long)ack->bytes, (unsigned long long)bytes);
    goto out;
  }
  rc = 0;
out:
  close(fd);
  return rc;
}

static void zb_result_init(zb_result_t *res, const zb_addr_t *addr, const zb_opts_t *o,
                           int test, uint32_t size)
{
  memset(res, 0, sizeof(*res));
  res->test = test;
  res->transport = addr->transport;
  res->size = size;
  res->unaligned = o->unaligned;
  res->fresh = o->fresh;
  res->validate = o->validate;
}

/* Run the sending end of one streaming test of messages of size bytes.
 * Returns 0 with *res filled, or -1 after reporting. */
int zb_stream_run(const zb_addr_t *addr, const zb_opts_t *o, uint32_t size,
                  zb_result_t *res)
{
  zb_buf_t b;
  zb_ack_t ack;
  uint64_t t0, t1, end, off = 0, msgs = 0;
  int fd;

  if (zb_buf_init(&b, size, (o->unaligned ? ZB_F_UNALIGNED : 0) | (o->fresh ? ZB_F_FRESH : 0)) < 0)
    return -1;
  if (!o->fresh)
    zb_pattern_fill(b.p, size, 0);
  if ((fd = zb_test_open(addr, o, ZB_STREAM, size)) < 0)
    goto out_err;
  t0 = zb_now_ns();
  end = t0 + (uint64_t)(o->seconds * 1e9);
  while (off < o->max_bytes) {                 /* bounded by bytes and time */
    char *p = zb_buf_get(&b);
    if (!p)
      goto out_err;
    if (o->validate) {
      zb_pattern_fill(p, size, off);
      zb_corrupt(o, p, size, off);
    } else if (o->fresh)
      memset(p, 0x5a, size);
    if (zb_send_full(fd, p, size) < 0) {
      zb_err("stream send: %s", strerror(errno));
      zb_buf_put(&b);
      (void)zb_test_close(fd, "stream", size, off, &ack);
      fd = -1;
      goto out_err;
    }
    zb_buf_put(&b);
    off += size;
    msgs++;
    if (zb_now_ns() >= end)
      break;
  }
  if (zb_test_close(fd, "stream", size, off, &ack) < 0) {
    fd = -1;
    goto out_err;
  }
  t1 = zb_now_ns();
  zb_buf_fini(&b);
  zb_result_init(res, addr, o, ZB_STREAM, size);
  res->bytes = ack.bytes;
  res->msgs = msgs;
  res->secs = (double)(t1 - t0) / 1e9;
  res->mbps = (double)ack.bytes / res->secs / 1e6;
  res->rx_mbps = ack.ns ? (double)ack.bytes * 1e3 / (double)ack.ns : 0;
  res->peer_zcsock = (int)ack.zcsock;
  return 0;
out_err:
  if (fd >= 0)
    close(fd);
  zb_buf_fini(&b);
  return -1;
}

static int zb_u64_cmp(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Median, 99th percentile (nearest rank) and mean of n samples in ns. */
static void zb_latency_stats(uint64_t *s, uint64_t n, zb_result_t *res)
{
  double sum = 0;
  uint64_t k = (n * 99 + 99) / 100;
  qsort(s, n, sizeof(*s), zb_u64_cmp);
  for (uint64_t i = 0; i < n; i++)
    sum += (double)s[i];
  res->median_us = (n % 2 ? (double)s[n / 2] : ((double)s[n / 2 - 1] + (double)s[n / 2]) / 2) / 1e3;
  res->p99_us = (double)s[k ? k - 1 : 0] / 1e3;
  res->mean_us = sum / (double)n / 1e3;
}

/* One timed round trip; returns 0, or -1 after reporting. */
static int zb_roundtrip(int fd, const zb_opts_t *o, zb_buf_t *tx, zb_buf_t *rx,
                        uint64_t off)
{
  char *p = zb_buf_get(tx), *q;
  long r, bad;
  if (!p)
    return -1;
  if (o->validate) {
    zb_pattern_fill(p, tx->size, off);
    zb_corrupt(o, p, tx->size, off);
  } else if (o->fresh)
    memset(p, 0x5a, tx->size);
  r = zb_send_full(fd, p, tx->size);
  zb_buf_put(tx);
  if (r < 0) {
    zb_err("ping-pong send: %s", strerror(errno));
    return -1;
  }
  if (!(q = zb_buf_get(rx)))
    return -1;
  r = zb_recv_full(fd, q, rx->size);
  if (r <= 0) {
    zb_err("ping-pong reply: %s", r == 0 || errno == EPROTO ?
           "connection closed by the server (see its messages)" : strerror(errno));
    zb_buf_put(rx);
    return -1;
  }
  bad = o->validate ? zb_pattern_check(q, rx->size, off) : -1;
  if (bad >= 0)
    zb_mismatch_report("client", "ping-pong reply", rx->size, off + (uint64_t)bad, (uint8_t)q[bad]);
  zb_buf_put(rx);
  return bad >= 0 ? -1 : 0;
}

/* Run the client end of one ping-pong test with messages of size bytes.
 * Returns 0 with *res filled, or -1 after reporting. */
int zb_pingpong_run(const zb_addr_t *addr, const zb_opts_t *o, uint32_t size,
                    zb_result_t *res)
{
  uint32_t bf = (o->unaligned ? ZB_F_UNALIGNED : 0) | (o->fresh ? ZB_F_FRESH : 0);
  uint64_t cap = o->max_iters < ZB_MAX_SAMPLES ? o->max_iters : ZB_MAX_SAMPLES;
  uint64_t warm = size >= (1u << 20) ? 1 : 10, n = 0, i, off = 0, end;
  uint64_t *samples = malloc(cap * sizeof(*samples));
  zb_buf_t tx, rx;
  zb_ack_t ack;
  int fd = -1;

  memset(&tx, 0, sizeof(tx));
  memset(&rx, 0, sizeof(rx));
  if (!samples || zb_buf_init(&tx, size, bf) < 0 || zb_buf_init(&rx, size, bf) < 0)
    goto out_err;
  if ((fd = zb_test_open(addr, o, ZB_PINGPONG, size)) < 0)
    goto out_err;
  end = zb_now_ns() + (uint64_t)(o->seconds * 1e9);
  for (i = 0; n < cap && i < cap + warm; i++) { /* bounded by count and time */
    uint64_t a = zb_now_ns(), b;
    if (zb_roundtrip(fd, o, &tx, &rx, off) < 0)
      goto out_err;
    b = zb_now_ns();
    off += size;
    if (i >= warm)
      samples[n++] = b - a;
    if (b >= end && n > 0)
      break;
  }
  if (zb_test_close(fd, "ping-pong", size, off, &ack) < 0) {
    fd = -1;
    goto out_err;
  }
  zb_result_init(res, addr, o, ZB_PINGPONG, size);
  zb_latency_stats(samples, n, res);
  res->msgs = n;
  res->bytes = off;
  res->peer_zcsock = (int)ack.zcsock;
  free(samples);
  zb_buf_fini(&tx);
  zb_buf_fini(&rx);
  return 0;
out_err:
  if (fd >= 0)
    close(fd);
  free(samples);
  zb_buf_fini(&tx);
  zb_buf_fini(&rx);
  return -1;
}

/* Ask the server to exit, and wait until it has closed the connection.
 * Returns 0, or -1 after reporting. */
int zb_quit_send(const zb_addr_t *addr, const zb_opts_t *o)
{
  zb_hdr_t h = { .magic = ZB_MAGIC, .test = ZB_QUIT };
  char c;
  int fd = zb_connect_open(addr, o);
  if (fd < 0)
    return -1;
  if (zb_send_full(fd, &h, sizeof(h)) < 0) {
    zb_err("asking the server to quit: %s", strerror(errno));
    close(fd);
    return -1;
  }
  (void)zb_recv_full(fd, &c, 1);
  close(fd);
  return 0;
}
