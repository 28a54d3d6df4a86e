/* zcbench: command line, the three modes (server, client, run), and the
 * report (a table on stdout, optionally CSV).  See zcbench.h and
 * examples/README.md.
 */
#include "zcbench.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *zb_role = "zcbench";
static const char *zb_transport_names[ZB_NTRANSPORTS] = { "tcp", "tcp6", "unix" };

static const char zb_usage[] =
  "usage: zcbench run    [options]   fork a server and run the client against it\n"
  "       zcbench server [options]   wait for a client (one transport)\n"
  "       zcbench client [options]   run the tests against a zcbench server\n"
  "\n"
  "Streaming throughput (MB/s: bytes the receiver counted over the sender's time\n"
  "until the receiver's final ack) and ping-pong round trips (median, p99, mean\n"
  "in microseconds) over TCP and AF_UNIX stream sockets.  Run it once plainly and\n"
  "once under libzcsock (LD_PRELOAD=libzcsock.so or `zcsock run -- zcbench ...`).\n"
  "\n"
  "transport\n"
  "  --transport LIST   tcp, tcp6, unix or all, comma-separated (run: default tcp,unix)\n"
  "  --ipv6             TCP over ::1 instead of 127.0.0.1 (same as tcp6)\n"
  "  --host ADDR        server: address to bind; client: address to connect to\n"
  "  --port N           TCP port (server/client default 7390; run: ephemeral)\n"
  "  --unix PATH        AF_UNIX socket path ('@name': abstract; run: a temporary path)\n"
  "tests\n"
  "  --test LIST        stream, pingpong or all (default all)\n"
  "  --sizes LIST       streaming message sizes, 1 .. 64M, K/M suffixes\n"
  "                     (default 1,64,1K,4K,16K,64K,256K,1M,4M,16M,64M)\n"
  "  --pp-sizes LIST    ping-pong message sizes (default 1)\n"
  "  --seconds S        time per size and test (default 0.5)\n"
  "  --bytes N          at most N bytes per streaming run (K/M/G suffixes)\n"
  "  --iters N          at most N round trips per ping-pong run\n"
  "buffers\n"
  "  --unaligned        buffers start a few bytes past a page boundary (default aligned)\n"
  "  --fresh            malloc/free a new buffer for every message (default reused)\n"
  "  --validate         sender writes a pattern of the stream offset, receiver checks\n"
  "                     every byte; the first mismatch fails the run (exit 1)\n"
  "other\n"
  "  --csv FILE         also write one CSV row per size and test\n"
  "  --timeout S        connect, accept and stalled I/O limit (default 10)\n"
  "  --cpu-server N     pin the server to CPU N\n"
  "  --cpu-client N     pin the client to CPU N\n"
  "  --quiet            no table on stdout (errors still go to stderr)\n"
  "  --corrupt OFFSET   with --validate: flip the sent byte at this stream offset\n"
  "                     (to see validation fail)\n"
  "  -h, --help         this text\n"
  "\n"
  "Exit status: 0 success, 1 a test failed or an error occurred, 2 bad arguments.\n";

void zb_err(const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s: %s\n", zb_role, msg);
}

/* Bad command line: one line on stderr, exit 2. */
static void zb_usage_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void zb_usage_fail(const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "zcbench: %s (try --help)\n", msg);
  exit(2);
}

uint64_t zb_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1 when libzcsock is loaded and intercepting, found without linking it. */
int zb_zcsock_active(void)
{
  int (*fn)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "zcsock_is_active");
  return fn && fn() == 1;
}

static const char *zb_zcsock_version(void)
{
  const char *(*fn)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "zcsock_version");
  const char *v = fn ? fn() : NULL;
  return v ? v : "?";
}

const char *zb_transport_name(int transport)
{
  return transport >= 0 && transport < ZB_NTRANSPORTS ? zb_transport_names[transport] : "?";
}

/* 4096 -> "4K", 1048576 -> "1M", 1000 -> "1000". */
void zb_size_format(uint32_t size, char *out, size_t len)
{
  if (size >= (1u << 20) && size % (1u << 20) == 0)
    snprintf(out, len, "%uM", size >> 20);
  else if (size >= 1024 && size % 1024 == 0)
    snprintf(out, len, "%uK", size >> 10);
  else
    snprintf(out, len, "%u", size);
}

/* ---- option parsing ---- */

/* "64K" -> 65536; K, M, G, T are powers of 1024.  Returns 0, or -1. */
static int zb_parse_u64(const char *s, uint64_t *v_p)
{
  char *end;
  unsigned long long v;
  int shift = 0;
  if (!s || *s < '0' || *s > '9')
    return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno)
    return -1;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  }
  if (*end == 'i' && shift)
    end++;
  if (*end == 'B' && shift)
    end++;
  if (*end || v > (UINT64_MAX >> shift))
    return -1;
  *v_p = (uint64_t)v << shift;
  return 0;
}

static double zb_parse_secs(const char *opt, const char *s, double lo, double hi)
{
  char *end;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi))
    zb_usage_fail("%s: '%s' is not a number of seconds in [%g, %g]", opt, s, lo, hi);
  return v;
}

static uint64_t zb_parse_num(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
  uint64_t v;
  if (zb_parse_u64(s, &v) < 0 || v < lo || v > hi)
    zb_usage_fail("%s: '%s' is not a number in [%llu, %llu]", opt, s,
                  (unsigned long long)lo, (unsigned long long)hi);
  return v;
}

static int zb_parse_sizes(const char *opt, const char *list, uint32_t *sizes)
{
  char buf[512], *save = NULL, *tok;
  int n = 0;
  if (strlen(list) >= sizeof(buf))
    zb_usage_fail("%s: list too long", opt);
  strcpy(buf, list);
  for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    uint64_t v;
    if (n == ZB_MAX_SIZES)
      zb_usage_fail("%s: at most %d sizes", opt, ZB_MAX_SIZES);
    if (zb_parse_u64(tok, &v) < 0 || v < 1 || v > ZB_MAX_SIZE)
      zb_usage_fail("%s: '%s' is not a size from 1 to 64M", opt, tok);
    sizes[n++] = (uint32_t)v;
  }
  if (n == 0)
    zb_usage_fail("%s: empty list", opt);
  return n;
}

static void zb_parse_transports(const char *list, zb_opts_t *o)
{
  char buf[128], *save = NULL, *tok;
  if (strlen(list) >= sizeof(buf))
    zb_usage_fail("--transport: list too long");
  strcpy(buf, list);
  o->ntransports = 0;
  for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int t, all = strcmp(tok, "all") == 0;
    for (t = 0; t < ZB_NTRANSPORTS; t++) {
      int dup = 0;
      if (!all && strcmp(tok, zb_transport_names[t]) != 0)
        continue;
      for (int i = 0; i < o->ntransports; i++)
        dup |= o->transports[i] == t;
      if (!dup)
        o->transports[o->ntransports++] = t;
      if (!all)
        break;
    }
    if (!all && t == ZB_NTRANSPORTS)
      zb_usage_fail("--transport: unknown transport '%s' (tcp, tcp6, unix, all)", tok);
  }
  if (o->ntransports == 0)
    zb_usage_fail("--transport: empty list");
}

static int zb_parse_tests(const char *list)
{
  char buf[128], *save = NULL, *tok;
  int tests = 0;
  if (strlen(list) >= sizeof(buf))
    zb_usage_fail("--test: list too long");
  strcpy(buf, list);
  for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strcmp(tok, "stream") == 0)
      tests |= 1 << ZB_STREAM;
    else if (strcmp(tok, "pingpong") == 0 || strcmp(tok, "pp") == 0)
      tests |= 1 << ZB_PINGPONG;
    else if (strcmp(tok, "all") == 0)
      tests |= (1 << ZB_STREAM) | (1 << ZB_PINGPONG);
    else
      zb_usage_fail("--test: unknown test '%s' (stream, pingpong, all)", tok);
  }
  if (!tests)
    zb_usage_fail("--test: empty list");
  return tests;
}

enum {
  OPT_TRANSPORT = 256, OPT_IPV6, OPT_HOST, OPT_PORT, OPT_UNIX, OPT_TEST, OPT_SIZES,
  OPT_PP_SIZES, OPT_SECONDS, OPT_BYTES, OPT_ITERS, OPT_UNALIGNED, OPT_FRESH,
  OPT_VALIDATE, OPT_CSV, OPT_TIMEOUT, OPT_CPU_SERVER, OPT_CPU_CLIENT, OPT_QUIET, OPT_CORRUPT,
};

static const struct option zb_longopts[] = {
  { "transport", required_argument, 0, OPT_TRANSPORT },
  { "ipv6", no_argument, 0, OPT_IPV6 },
  { "host", required_argument, 0, OPT_HOST },
  { "port", required_argument, 0, OPT_PORT },
  { "unix", required_argument, 0, OPT_UNIX },
  { "test", required_argument, 0, OPT_TEST },
  { "sizes", required_argument, 0, OPT_SIZES },
  { "pp-sizes", required_argument, 0, OPT_PP_SIZES },
  { "seconds", required_argument, 0, OPT_SECONDS },
  { "bytes", required_argument, 0, OPT_BYTES },
  { "iters", required_argument, 0, OPT_ITERS },
  { "unaligned", no_argument, 0, OPT_UNALIGNED },
  { "fresh", no_argument, 0, OPT_FRESH },
  { "validate", no_argument, 0, OPT_VALIDATE },
  { "csv", required_argument, 0, OPT_CSV },
  { "timeout", required_argument, 0, OPT_TIMEOUT },
  { "cpu-server", required_argument, 0, OPT_CPU_SERVER },
  { "cpu-client", required_argument, 0, OPT_CPU_CLIENT },
  { "quiet", no_argument, 0, OPT_QUIET },
  { "corrupt", required_argument, 0, OPT_CORRUPT },
  { "help", no_argument, 0, 'h' },
  { 0, 0, 0, 0 },
};

static void zb_opts_default(zb_opts_t *o)
{
  static const uint32_t sizes[] = { 1, 64, 1u << 10, 4u << 10, 16u << 10, 64u << 10,
                                    256u << 10, 1u << 20, 4u << 20, 16u << 20, 64u << 20 };
  memset(o, 0, sizeof(*o));
  o->transports[0] = ZB_TCP;
  o->transports[1] = ZB_UNIX;
  o->ntransports = 2;
  o->tests = (1 << ZB_STREAM) | (1 << ZB_PINGPONG);
  memcpy(o->sizes, sizes, sizeof(sizes));
  o->nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
  o->pp_sizes[0] = 1;
  o->npp_sizes = 1;
  o->seconds = 0.5;
  o->max_bytes = UINT64_MAX;
  o->max_iters = ZB_MAX_SAMPLES;
  o->timeout = 10;
  o->cpu_server = o->cpu_client = -1;
  o->corrupt_at = UINT64_MAX;
}

static void zb_opts_parse(int argc, char **argv, zb_opts_t *o)
{
  int c, explicit_transport = 0, ipv6 = 0;

  zb_opts_default(o);
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(zb_usage, stdout);
      exit(0);
    }
  if (argc < 2 || argv[1][0] == '-')
    zb_usage_fail("missing mode: run, server or client");
  if (strcmp(argv[1], "run") == 0)
    o->mode = ZB_MODE_RUN;
  else if (strcmp(argv[1], "server") == 0)
    o->mode = ZB_MODE_SERVER;
  else if (strcmp(argv[1], "client") == 0)
    o->mode = ZB_MODE_CLIENT;
  else
    zb_usage_fail("unknown mode '%s' (run, server, client)", argv[1]);
  optind = 2;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", zb_longopts, NULL)) != -1) {
    switch (c) {
    case OPT_TRANSPORT: zb_parse_transports(optarg, o); explicit_transport = 1; break;
    case OPT_IPV6: ipv6 = 1; break;
    case OPT_HOST: o->host = optarg; break;
    case OPT_PORT: o->port = (int)zb_parse_num("--port", optarg, 0, 65535); break;
    case OPT_UNIX:
      if (strlen(optarg) == 0 || strlen(optarg) >= sizeof(((zb_addr_t *)0)->path))
        zb_usage_fail("--unix: path empty or longer than 107 bytes");
      o->unix_path = optarg;
      break;
    case OPT_TEST: o->tests = zb_parse_tests(optarg); break;
    case OPT_SIZES: o->nsizes = zb_parse_sizes("--sizes", optarg, o->sizes); break;
    case OPT_PP_SIZES: o->npp_sizes = zb_parse_sizes("--pp-sizes", optarg, o->pp_sizes); break;
    case OPT_SECONDS: o->seconds = zb_parse_secs("--seconds", optarg, 0.001, 3600); break;
    case OPT_BYTES: o->max_bytes = zb_parse_num("--bytes", optarg, 1, UINT64_MAX); break;
    case OPT_ITERS: o->max_iters = zb_parse_num("--iters", optarg, 1, ZB_MAX_SAMPLES); break;
    case OPT_UNALIGNED: o->unaligned = 1; break;
    case OPT_FRESH: o->fresh = 1; break;
    case OPT_VALIDATE: o->validate = 1; break;
    case OPT_CSV: o->csv_path = optarg; break;
    case OPT_TIMEOUT: o->timeout = zb_parse_secs("--timeout", optarg, 0.1, 3600); break;
    case OPT_CPU_SERVER: o->cpu_server = (int)zb_parse_num("--cpu-server", optarg, 0, 1023); break;
    case OPT_CPU_CLIENT: o->cpu_client = (int)zb_parse_num("--cpu-client", optarg, 0, 1023); break;
    case OPT_QUIET: o->quiet = 1; break;
    case OPT_CORRUPT: o->corrupt_at = zb_parse_num("--corrupt", optarg, 0, UINT64_MAX - 1); break;
    case ':': zb_usage_fail("option '%s' needs a value", argv[optind - 1]);
    default: zb_usage_fail("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    zb_usage_fail("unexpected argument '%s'", argv[optind]);
  if (!explicit_transport && (ipv6 || o->unix_path || o->mode != ZB_MODE_RUN)) {
    o->transports[0] = o->unix_path ? ZB_UNIX : ipv6 ? ZB_TCP6 : ZB_TCP;
    o->ntransports = 1;
  }
  for (int i = 0; ipv6 && i < o->ntransports; i++)
    if (o->transports[i] == ZB_TCP)
      o->transports[i] = ZB_TCP6;
  if (o->mode != ZB_MODE_RUN && o->ntransports != 1)
    zb_usage_fail("server and client modes take one transport");
  if (o->mode != ZB_MODE_RUN && o->transports[0] == ZB_UNIX && !o->unix_path)
    zb_usage_fail("server and client modes need --unix PATH for AF_UNIX");
  if (o->mode != ZB_MODE_RUN && o->port == 0)
    o->port = ZB_DEFAULT_PORT;
}

/* ---- report ---- */

static void zb_table_header(const zb_opts_t *o, int argc, char **argv)
{
  if (o->quiet)
    return;
  printf("# zcbench");
  for (int i = 1; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\n");
  if (zb_zcsock_active())
    printf("zcsock: active (libzcsock %s)\n", zb_zcsock_version());
  else
    printf("zcsock: inactive\n");
  printf("%-9s %-5s %6s %-9s %-6s %10s %10s %10s %10s %10s\n", "test", "tport", "size",
         "align", "buffer", "MB/s", "median_us", "p99_us", "mean_us", "msgs");
  fflush(stdout);
}

static void zb_table_row(const zb_opts_t *o, const zb_result_t *r)
{
  char sz[32];
  if (o->quiet)
    return;
  zb_size_format(r->size, sz, sizeof(sz));
  if (r->test == ZB_STREAM)
    printf("%-9s %-5s %6s %-9s %-6s %10.1f %10s %10s %10s %10llu\n", "stream",
           zb_transport_name(r->transport), sz, r->unaligned ? "unaligned" : "page",
           r->fresh ? "fresh" : "reused", r->mbps, "-", "-", "-", (unsigned long long)r->msgs);
  else
    printf("%-9s %-5s %6s %-9s %-6s %10s %10.2f %10.2f %10.2f %10llu\n", "pingpong",
           zb_transport_name(r->transport), sz, r->unaligned ? "unaligned" : "page",
           r->fresh ? "fresh" : "reused", "-", r->median_us, r->p99_us, r->mean_us,
           (unsigned long long)r->msgs);
  fflush(stdout);
}

static FILE *zb_csv_open(const char *path)
{
  FILE *f = fopen(path, "w");
  if (!f) {
    zb_err("cannot write %s: %s", path, strerror(errno));
    return NULL;
  }
  fprintf(f, "test,transport,size,aligned,fresh,validate,mbps,rx_mbps,median_us,p99_us,"
             "mean_us,msgs,bytes,seconds,zcsock,peer_zcsock\n");
  return f;
}

static void zb_csv_row(FILE *f, const zb_result_t *r)
{
  const char *me = zb_zcsock_active() ? "active" : "inactive";
  const char *peer = r->peer_zcsock ? "active" : "inactive";
  if (!f)
    return;
  if (r->test == ZB_STREAM)
    fprintf(f, "stream,%s,%u,%d,%d,%d,%.2f,%.2f,,,,%llu,%llu,%.4f,%s,%s\n",
            zb_transport_name(r->transport), r->size, !r->unaligned, r->fresh, r->validate,
            r->mbps, r->rx_mbps, (unsigned long long)r->msgs, (unsigned long long)r->bytes,
            r->secs, me, peer);
  else
    fprintf(f, "pingpong,%s,%u,%d,%d,%d,,,%.3f,%.3f,%.3f,%llu,%llu,,%s,%s\n",
            zb_transport_name(r->transport), r->size, !r->unaligned, r->fresh, r->validate,
            r->median_us, r->p99_us, r->mean_us, (unsigned long long)r->msgs,
            (unsigned long long)r->bytes, me, peer);
  fflush(f);
}

/* ---- modes ---- */

/* Accept and serve test connections until the client says quit.  Returns 0,
 * or 1 after a failure (reported). */
static int zb_serve_loop(const int *lfds, int nl, const zb_opts_t *o, double first_wait)
{
  for (int n = 0; n < 1000000; n++) {
    int fd = zb_accept_wait(lfds, nl, o, n == 0 ? first_wait : o->timeout);
    if (fd < 0)
      return 1;
    int r = zb_serve_conn(fd, o);
    close(fd);
    if (r < 0)
      return 1;
    if (r == 1)
      return 0;
  }
  zb_err("too many connections");
  return 1;
}

/* All tests of the options against addr; rows go to stdout and csv. */
static int zb_client_tests(const zb_addr_t *addr, const zb_opts_t *o, FILE *csv)
{
  zb_result_t res;
  for (int i = 0; (o->tests & (1 << ZB_STREAM)) && i < o->nsizes; i++) {
    if (zb_stream_run(addr, o, o->sizes[i], &res) < 0)
      return -1;
    zb_table_row(o, &res);
    zb_csv_row(csv, &res);
  }
  for (int i = 0; (o->tests & (1 << ZB_PINGPONG)) && i < o->npp_sizes; i++) {
    if (zb_pingpong_run(addr, o, o->pp_sizes[i], &res) < 0)
      return -1;
    zb_table_row(o, &res);
    zb_csv_row(csv, &res);
  }
  return 0;
}

static void zb_addr_init(zb_addr_t *addr, const zb_opts_t *o, int transport)
{
  memset(addr, 0, sizeof(*addr));
  addr->transport = transport;
  addr->host = o->host;
  addr->port = o->port;
  if (transport == ZB_UNIX && o->unix_path)
    snprintf(addr->path, sizeof(addr->path), "%s", o->unix_path);
}

/* Wait up to secs for the server child to exit; kill it after that.
 * Returns its exit status, or 1. */
static int zb_child_wait(pid_t pid, double secs)
{
  uint64_t end = zb_now_ns() + (uint64_t)(secs * 1e9);
  int st;
  for (int i = 0; i < 100000; i++) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (r < 0 && errno != EINTR)
      return 1;
    if (zb_now_ns() >= end)
      break;
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
  zb_err("server process %d did not exit; killing it", (int)pid);
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return 1;
}

/* Server child of run mode: listen on every transport, tell the parent the
 * ports, serve until the parent says quit. */
static void zb_run_child(zb_addr_t *addrs, const zb_opts_t *o, int wfd)
{
  int lfds[ZB_NTRANSPORTS], ports[ZB_NTRANSPORTS], n, rc;
  zb_role = "zcbench server";
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (zb_cpu_pin(o->cpu_server) < 0)
    _exit(1);
  for (n = 0; n < o->ntransports; n++) {
    if ((lfds[n] = zb_listen_open(&addrs[n])) < 0)
      _exit(1);
    ports[n] = addrs[n].port;
  }
  if (write(wfd, ports, sizeof(int) * (size_t)n) != (ssize_t)(sizeof(int) * (size_t)n))
    _exit(1);
  close(wfd);
  rc = zb_serve_loop(lfds, n, o, o->timeout);
  for (int i = 0; i < n; i++) {
    close(lfds[i]);
    zb_unix_cleanup(&addrs[i]);
  }
  exit(rc);              /* not _exit: a preloaded library's exit report runs */
}

/* Read the ports the child listens on.  Returns 0, or -1 after reporting. */
static int zb_run_ready(int rfd, const zb_opts_t *o, zb_addr_t *addrs)
{
  struct pollfd pfd = { .fd = rfd, .events = POLLIN };
  int ports[ZB_NTRANSPORTS];
  ssize_t want = (ssize_t)(sizeof(int) * (size_t)o->ntransports);
  if (poll(&pfd, 1, (int)(o->timeout * 1000)) <= 0 || read(rfd, ports, (size_t)want) != want) {
    zb_err("the server process did not start (see its message above)");
    return -1;
  }
  for (int i = 0; i < o->ntransports; i++)
    addrs[i].port = ports[i];
  return 0;
}

/* Run mode: one forked server process listens on every transport; the
 * client runs the tests of each transport in turn, then asks it to quit. */
static int zb_run_all(const zb_opts_t *o, FILE *csv)
{
  zb_addr_t addrs[ZB_NTRANSPORTS];
  int pfd[2], rc;
  pid_t pid;

  for (int i = 0; i < o->ntransports; i++) {
    zb_addr_init(&addrs[i], o, o->transports[i]);
    if (addrs[i].transport == ZB_UNIX)
      zb_unix_path_default(&addrs[i]);
  }
  if (pipe2(pfd, O_CLOEXEC) < 0) {
    zb_err("pipe: %s", strerror(errno));
    return -1;
  }
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    zb_err("fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    close(pfd[0]);
    zb_run_child(addrs, o, pfd[1]);
  }
  close(pfd[1]);
  rc = zb_run_ready(pfd[0], o, addrs);
  close(pfd[0]);
  for (int i = 0; rc == 0 && i < o->ntransports; i++)
    rc = zb_client_tests(&addrs[i], o, csv);
  if (rc == 0 && !o->quiet) {
    printf("# processes: client pid %d, server pid %d\n", (int)getpid(), (int)pid);
    fflush(stdout);
  }
  if (rc == 0)
    rc = zb_quit_send(&addrs[0], o);
  if (rc < 0)
    kill(pid, SIGKILL);
  if (zb_child_wait(pid, o->timeout) != 0 && rc == 0) {
    zb_err("the server process failed");
    rc = -1;
  }
  for (int i = 0; i < o->ntransports; i++)
    zb_unix_cleanup(&addrs[i]);
  return rc;
}

static int zb_server_main(const zb_opts_t *o)
{
  zb_addr_t addr;
  int lfd, rc;
  zb_role = "zcbench server";
  zb_addr_init(&addr, o, o->transports[0]);
  if (zb_cpu_pin(o->cpu_server) < 0 || (lfd = zb_listen_open(&addr)) < 0)
    return 1;
  if (!o->quiet) {
    if (addr.transport == ZB_UNIX)
      printf("zcbench server: listening on unix %s", addr.path);
    else
      printf("zcbench server: listening on %s %s port %d", zb_transport_name(addr.transport),
             addr.host ? addr.host : addr.transport == ZB_TCP6 ? "::1" : "127.0.0.1", addr.port);
    printf(" (zcsock: %s)\n", zb_zcsock_active() ? "active" : "inactive");
    fflush(stdout);
  }
  rc = zb_serve_loop(&lfd, 1, o, o->timeout * 30);
  close(lfd);
  zb_unix_cleanup(&addr);
  if (!o->quiet && rc == 0)
    printf("zcbench server: done\n");
  return rc;
}

int main(int argc, char **argv)
{
  zb_opts_t o;
  FILE *csv = NULL;
  int rc = 0;

  zb_opts_parse(argc, argv, &o);
  signal(SIGPIPE, SIG_IGN);
  if (o.mode == ZB_MODE_SERVER)
    return zb_server_main(&o);
  zb_role = o.mode == ZB_MODE_RUN ? "zcbench" : "zcbench client";
  if (o.csv_path && !(csv = zb_csv_open(o.csv_path)))
    return 1;
  zb_table_header(&o, argc, argv);
  if (zb_cpu_pin(o.cpu_client) < 0)
    rc = -1;
  if (rc == 0 && o.mode == ZB_MODE_RUN)
    rc = zb_run_all(&o, csv);
  for (int i = 0; rc == 0 && o.mode == ZB_MODE_CLIENT && i < o.ntransports; i++) {
    zb_addr_t addr;
    zb_addr_init(&addr, &o, o.transports[i]);
    rc = zb_client_tests(&addr, &o, csv);
    if (rc == 0)
      rc = zb_quit_send(&addr, &o);
  }
  if (csv && fclose(csv) != 0) {
    zb_err("writing %s: %s", o.csv_path, strerror(errno));
    rc = -1;
  }
  if (rc != 0)
    zb_err("FAILED");
  return rc == 0 ? 0 : 1;
}
