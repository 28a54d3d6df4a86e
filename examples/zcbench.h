/* zcbench: a socket benchmark that zcsock users run with and without the
 * library (LD_PRELOAD=libzcsock.so or `zcsock run -- zcbench ...`).
 *
 * Plain C with no link dependency on libzcsock: whether the library is active
 * is found at run time through dlsym(RTLD_DEFAULT, "zcsock_is_active").
 *
 * Files: zcbench.c (options, modes, report), zcbench_net.c (sockets,
 * timeouts, wire protocol), zcbench_test.c (buffers, validation pattern,
 * streaming and ping-pong loops).
 */
#ifndef ZCBENCH_H
#define ZCBENCH_H

#include <stddef.h>
#include <stdint.h>

#define ZB_MAX_SIZE      (64u << 20)  /* largest message: 64 MiB */
#define ZB_MAX_SIZES     32           /* entries in a --sizes list */
#define ZB_MAX_SAMPLES   2000000u     /* ping-pong samples kept per run */
#define ZB_UNALIGN_OFF   5            /* --unaligned: bytes past a page start */
#define ZB_PAGE          4096u
#define ZB_DEFAULT_PORT  7390
#define ZB_MAGIC         0x7a636231u  /* "zcb1" */
#define ZB_ACK_MAGIC     0x7a636261u  /* "zcba" */

enum zb_mode { ZB_MODE_SERVER = 1, ZB_MODE_CLIENT, ZB_MODE_RUN };
enum zb_transport { ZB_TCP = 0, ZB_TCP6, ZB_UNIX, ZB_NTRANSPORTS };
enum zb_test { ZB_STREAM = 1, ZB_PINGPONG = 2, ZB_QUIT = 3 };

/* Wire flags of a test header. */
#define ZB_F_UNALIGNED 1u
#define ZB_F_FRESH     2u
#define ZB_F_VALIDATE  4u

/* Ack status. */
#define ZB_ACK_OK       0u
#define ZB_ACK_MISMATCH 1u
#define ZB_ACK_ERROR    2u

/* First bytes the client sends on every test connection (host byte order:
 * both ends run on hosts of the same architecture). */
typedef struct zb_hdr {
  uint32_t magic;
  uint32_t test;         /* enum zb_test */
  uint32_t size;         /* message size in bytes */
  uint32_t flags;        /* ZB_F_* */
  uint64_t limit_ns;     /* the receiver gives up after this long */
} zb_hdr_t;

/* What the server sends back once the client has shut down its side. */
typedef struct zb_ack {
  uint32_t magic;
  uint32_t status;       /* ZB_ACK_* */
  uint64_t bytes;        /* payload bytes the server received */
  uint64_t msgs;         /* receive calls (stream) or round trips (ping-pong) */
  uint64_t ns;           /* receiver time from header to end of stream */
  uint64_t bad_offset;   /* first mismatching stream offset (status 1) */
  uint32_t zcsock;       /* 1 when libzcsock was active in the server */
  uint32_t pad;
} zb_ack_t;

typedef struct zb_opts {
  int mode;                          /* enum zb_mode */
  int transports[ZB_NTRANSPORTS];    /* in run order */
  int ntransports;
  int tests;                         /* bit (1 << ZB_STREAM) | (1 << ZB_PINGPONG) */
  uint32_t sizes[ZB_MAX_SIZES];      /* streaming sizes */
  int nsizes;
  uint32_t pp_sizes[ZB_MAX_SIZES];   /* ping-pong sizes */
  int npp_sizes;
  double seconds;                    /* per size and test */
  uint64_t max_bytes;                /* per streaming run */
  uint64_t max_iters;                /* per ping-pong run */
  double timeout;                    /* connect/accept/stalled I/O */
  int unaligned, fresh, validate;
  const char *host;                  /* NULL: loopback of the family */
  int port;                          /* 0: default or ephemeral */
  const char *unix_path;             /* NULL: a temporary path */
  const char *csv_path;
  int cpu_server, cpu_client;        /* -1: no pinning */
  int quiet;                         /* no table on stdout */
  uint64_t corrupt_at;               /* --corrupt: flip this stream byte */
} zb_opts_t;

/* One line of the report. */
typedef struct zb_result {
  int test, transport;
  uint32_t size;
  int unaligned, fresh, validate;
  double mbps;        /* bytes the receiver counted / sender time to the ack */
  double rx_mbps;     /* the same bytes / receiver's own time */
  double median_us, p99_us, mean_us;
  uint64_t msgs, bytes;
  double secs;
  int peer_zcsock;
} zb_result_t;

/* Address of the server as the client needs it. */
typedef struct zb_addr {
  int transport;
  const char *host;
  int port;
  char path[108];     /* AF_UNIX; a leading '@' means the abstract namespace */
} zb_addr_t;

/* --- zcbench.c --- */
void zb_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t zb_now_ns(void);
int zb_zcsock_active(void);
const char *zb_transport_name(int transport);
void zb_size_format(uint32_t size, char *out, size_t len);

/* --- zcbench_net.c --- */
int zb_listen_open(zb_addr_t *addr);
int zb_accept_wait(const int *lfds, int n, const zb_opts_t *o, double timeout);
int zb_connect_open(const zb_addr_t *addr, const zb_opts_t *o);
int zb_send_full(int fd, const void *buf, size_t len);
long zb_recv_full(int fd, void *buf, size_t len);
int zb_ack_send(int fd, zb_ack_t *ack);
int zb_ack_recv(int fd, zb_ack_t *ack);
void zb_unix_cleanup(const zb_addr_t *addr);
void zb_unix_path_default(zb_addr_t *addr);
int zb_cpu_pin(int cpu);
int zb_nodelay_set(int fd);

/* --- zcbench_test.c --- */
int zb_serve_conn(int fd, const zb_opts_t *o);
int zb_stream_run(const zb_addr_t *addr, const zb_opts_t *o, uint32_t size,
                  zb_result_t *res);
int zb_pingpong_run(const zb_addr_t *addr, const zb_opts_t *o, uint32_t size,
                    zb_result_t *res);
int zb_quit_send(const zb_addr_t *addr, const zb_opts_t *o);

#endif
