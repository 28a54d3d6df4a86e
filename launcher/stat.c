/* `zcsock stat`: what the library is doing in a running process, read from
 * the live file each process under the library publishes at its first
 * socket (common/zc_live.h).  Nothing is asked of the process for the
 * shim's counters: they are the file's pages.  The modules' counters (pin-
 * down cache, allocator hooks, pairing reasons) come from a report the
 * process writes at its next call into the library when asked (want/done);
 * a process asleep in the kernel answers only when it wakes, so their age
 * is shown.
 *
 *   zcsock stat                      every process of this user, one line each
 *   zcsock stat PID [--all]          its counters, grouped; zeros hidden
 *   zcsock stat PID --json           the same for scripts
 *   zcsock stat PID --watch [S]      every S seconds (1), what moved, per second
 *   zcsock stat PID --advise         what to change, with the evidence
 *
 * A file whose process is gone (killed: no exit ran) or whose pid now
 * names another process is stale: listed as such once and removed. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zcl.h"
#include "zc_live.h"

#define ZCL_KEYS_MAX 1024
#define ZCL_ANSWER_MS 300      /* how long a report request waits for the process */

typedef struct zcl_live {
	int pid;
	size_t size;
	const char *map;
	zc_live_hdr_t *h;
} zcl_live_t;

typedef struct zcl_kv {
	char key[ZC_LIVE_NAME_LEN];
	uint64_t value;
} zcl_kv_t;

struct zcl_snap {
	int n;
	zcl_kv_t kv[ZCL_KEYS_MAX];
	double text_age;       /* seconds since the modules' counters were written, -1: none */
	double t;              /* when read (monotonic seconds) */
};

static const char zcl_stat_usage[] =
	"usage: zcsock stat [PID [--all] [--json] [--watch [SECONDS]] [--count N]\n"
	"                        [--advise] [--conns]]\n"
	"\n"
	"Show what libzcsock.so is doing in running processes of this user, read\n"
	"from the file each one publishes at its first socket (ZCSOCK_LIVE=1, the\n"
	"default; under $XDG_RUNTIME_DIR/zcsock, /run/user/UID/zcsock or\n"
	"/dev/shm/zcsock-UID, mode 0700).\n"
	"\n"
	"  (no PID)        one line per process: pid, command, age, sockets,\n"
	"                  connections paired, bytes by path, exchange share\n"
	"  PID             the process's counters now, grouped (zeros hidden)\n"
	"  --all           zeros too\n"
	"  --json          one JSON object (with --watch: one per line)\n"
	"  --watch [S]     every S seconds (default 1): the counters that moved\n"
	"                  and their rate per second, until interrupted\n"
	"  --count N       with --watch: stop after N refreshes\n"
	"  --advise        what to change, each with the counters behind it\n"
	"  --conns         every socket the library tracks: addresses, the path that\n"
	"                  carries it (kernel, ring), its bytes by path, and why it\n"
	"                  is not on the ring (written by the process at its next\n"
	"                  call into the library)\n"
	"  -h, --help      print this text\n"
	"\n"
	"exit status: 0; 1 when the process publishes nothing; 2 on a usage error.\n";

static double zcl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void zcl_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* /proc/PID/stat's start time, 0 when the process does not exist. */
static uint64_t zcl_starttime(int pid)
{
	char path[64], buf[1024], *p;
	uint64_t v = 0;
	int field;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	for (field = 2; p && *p && field < 22; p++)
		if (*p == ' ')
			field++;
	while (p && isdigit((unsigned char)*p))
		v = v * 10 + (uint64_t)(*p++ - '0');
	return v;
}

/* Every offset the header names lies inside the file. */
static int zcl_live_valid(const zc_live_hdr_t *h, size_t size)
{
	uint64_t names_end = h->names_off + (uint64_t)(h->nstats + h->aux_max) * ZC_LIVE_NAME_LEN;

	return size >= 4096 && h->magic == ZC_LIVE_MAGIC && h->version == ZC_LIVE_VERSION &&
	       h->hdr_size >= sizeof(*h) && h->nstats > 0 && h->nstats <= ZCL_KEYS_MAX &&
	       h->names_off >= 4096 && names_end <= h->text_off &&
	       h->text_off + ZC_LIVE_TEXT_SIZE <= h->store_off &&
	       h->store_off + h->store_size <= size && h->store_size < size &&
	       h->shared_off + (uint64_t)h->nstats * 8 <= h->store_size &&
	       h->aux_max <= ZCL_KEYS_MAX && h->naux_off + 4 <= h->store_size &&
	       h->aux_off + (uint64_t)h->aux_max * 8 <= h->store_size &&
	       h->blocks_used_off + 4 <= h->store_size && h->block_stride >= (uint64_t)h->nstats * 8 &&
	       h->blocks_off + (uint64_t)h->nblocks * h->block_stride <= h->store_size;
}

/* Open pid's file in dir: 0, -ENOENT (none), -ESTALE (its process is gone:
 * the file was removed), -EPROTO (not a live file of ours). */
static int zcl_live_open(const char *dir, int pid, zcl_live_t *l)
{
	char path[ZCL_PATH_MAX], conns[ZCL_PATH_MAX + 8];
	struct stat st;
	void *m;
	int fd;

	snprintf(path, sizeof(path), "%s/%d", dir, pid);
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EPROTO;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (size_t)st.st_size < 4096) {
		close(fd);
		return -EPROTO;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -EPROTO;
	l->pid = pid;
	l->size = (size_t)st.st_size;
	l->map = m;
	l->h = m;
	if (!zcl_live_valid(l->h, l->size) || l->h->pid != pid) {
		munmap(m, l->size);
		return -EPROTO;
	}
	if (zcl_starttime(pid) != l->h->starttime || !l->h->starttime) {
		munmap(m, l->size);
		unlink(path);      /* killed before its exit ran, or its pid reused */
		snprintf(conns, sizeof(conns), "%s.conns", path);
		unlink(conns);          /* and its connection list */
		return -ESTALE;
	}
	return 0;
}

static void zcl_live_close(zcl_live_t *l)
{
	munmap((void *)l->map, l->size);
}

static uint64_t zcl_live_value(const zcl_live_t *l, unsigned i)
{
	const zc_live_hdr_t *h = l->h;
	const char *store = l->map + h->store_off;
	uint32_t used = __atomic_load_n((const uint32_t *)(store + h->blocks_used_off),
					__ATOMIC_RELAXED);
	uint64_t v = __atomic_load_n((const uint64_t *)(store + h->shared_off) + i, __ATOMIC_RELAXED);
	uint32_t b;

	if (used > h->nblocks)
		used = h->nblocks;
	for (b = 0; b < used; b++)
		v += __atomic_load_n((const uint64_t *)(store + h->blocks_off + b * h->block_stride) + i,
				     __ATOMIC_RELAXED);
	return v;
}

static int zcl_snap_find(const zcl_snap_t *s, const char *key)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->kv[i].key, key))
			return i;
	return -1;
}

static uint64_t zcl_get(const zcl_snap_t *s, const char *key)
{
	int i = zcl_snap_find(s, key);

	return i < 0 ? 0 : s->kv[i].value;
}

/* Sum of every counter whose key starts with prefix. */
static uint64_t zcl_sum(const zcl_snap_t *s, const char *prefix)
{
	size_t n = strlen(prefix);
	uint64_t v = 0;
	int i;

	for (i = 0; i < s->n; i++)
		if (!strncmp(s->kv[i].key, prefix, n))
			v += s->kv[i].value;
	return v;
}

/* The modules' counters from the report text: asked for (want), waited for
 * up to wait_ms, read whole (text_seq even and unchanged). */
static void zcl_live_text(const zcl_live_t *l, int wait_ms, zcl_snap_t *s)
{
	zc_live_hdr_t *h = l->h;
	uint32_t want = __atomic_add_fetch(&h->want, 1, __ATOMIC_ACQ_REL), seq, len;
	static char text[ZC_LIVE_TEXT_SIZE + 1];
	double t0 = zcl_now();
	char *line, *save = NULL;
	struct timespec now;
	int tries;

	while ((int32_t)(__atomic_load_n(&h->done, __ATOMIC_ACQUIRE) - want) < 0 &&
	       (zcl_now() - t0) * 1000 < wait_ms)
		zcl_sleep_ms(2);
	s->text_age = -1;
	for (tries = 0; tries < 100; tries++) {
		seq = __atomic_load_n(&h->text_seq, __ATOMIC_ACQUIRE);
		len = h->text_len;
		if (seq & 1 || len > ZC_LIVE_TEXT_SIZE) {
			zcl_sleep_ms(1);
			continue;
		}
		memcpy(text, l->map + h->text_off, len);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&h->text_seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	if (tries == 100 || !h->text_ns)
		return;
	text[len] = 0;
	clock_gettime(CLOCK_REALTIME, &now);
	s->text_age = ((double)now.tv_sec * 1e9 + (double)now.tv_nsec - (double)h->text_ns) / 1e9;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strstr(line, ": ");

		if (line[0] == '#' || !colon || colon - line >= ZC_LIVE_NAME_LEN ||
		    s->n == ZCL_KEYS_MAX)
			continue;
		*colon = 0;
		if (zcl_snap_find(s, line) >= 0)
			continue;     /* the shim's own: live already */
		snprintf(s->kv[s->n].key, sizeof(s->kv[s->n].key), "%s", line);
		s->kv[s->n++].value = strtoull(colon + 2, NULL, 10);
	}
}

/* Every counter now: the shim's and the aux ones from the store, the other
 * modules' from the text. */
static void zcl_live_snap(const zcl_live_t *l, int wait_ms, zcl_snap_t *s)
{
	const zc_live_hdr_t *h = l->h;
	const char *store = l->map + h->store_off;
	unsigned i, naux;

	s->n = 0;
	s->t = zcl_now();
	if (!h->store_live) {   /* every counter by the report text (zc_live.h) */
		zcl_live_text(l, wait_ms < 0 ? 150 : wait_ms, s);
		return;
	}
	for (i = 0; i < h->nstats && s->n < ZCL_KEYS_MAX; i++) {
		const char *k = l->map + h->names_off + (size_t)i * ZC_LIVE_NAME_LEN;

		memcpy(s->kv[s->n].key, k, ZC_LIVE_NAME_LEN);
		s->kv[s->n].key[ZC_LIVE_NAME_LEN - 1] = 0;
		if (!s->kv[s->n].key[0])
			continue;
		s->kv[s->n++].value = zcl_live_value(l, i);
	}
	naux = __atomic_load_n((const uint32_t *)(store + h->naux_off), __ATOMIC_ACQUIRE);
	for (i = 0; i < naux && i < h->aux_max && s->n < ZCL_KEYS_MAX; i++) {
		const char *k = l->map + h->names_off + (size_t)(h->nstats + i) * ZC_LIVE_NAME_LEN;

		memcpy(s->kv[s->n].key, k, ZC_LIVE_NAME_LEN);
		s->kv[s->n].key[ZC_LIVE_NAME_LEN - 1] = 0;
		if (!s->kv[s->n].key[0])
			continue;
		s->kv[s->n++].value = __atomic_load_n((const uint64_t *)(store + h->aux_off) + i,
						      __ATOMIC_RELAXED);
	}
	if (wait_ms >= 0)
		zcl_live_text(l, wait_ms, s);
}

static void zcl_json_str(FILE *out, const char *p)
{
	fputc('"', out);
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

/* --- the list of processes --------------------------------------------------- */

static void zcl_human(char *buf, size_t size, double v)
{
	const char *unit = "kMGTP";
	int u = -1;

	while (v >= 1000 && u < 4) {
		v /= 1000;
		u++;
	}
	if (u < 0)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.1f%c", v, unit[u]);
}

static int zcl_stat_list(const char *dir, int json)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int shown = 0, stale = 0;

	if (!d) {
		if (json)
			printf("[]\n");
		else
			printf("no process of this user publishes live statistics (%s: %s)\n", dir,
			       strerror(errno));
		return ZCL_EXIT_OK;
	}
	if (json)
		printf("[");
	while ((e = readdir(d))) {
		static zcl_snap_t s;
		zcl_live_t l;
		char kern[16], ring[16], xchg[16];
		uint64_t kb, lb, xb, paired;
		double age;
		struct timespec now;
		int pid = atoi(e->d_name), rc;

		if (pid <= 0 || strspn(e->d_name, "0123456789") != strlen(e->d_name))
			continue;
		rc = zcl_live_open(dir, pid, &l);
		if (rc == -ESTALE) {
			stale++;
			continue;
		}
		if (rc)
			continue;
		zcl_live_snap(&l, -1, &s);
		clock_gettime(CLOCK_REALTIME, &now);
		age = ((double)now.tv_sec * 1e9 + (double)now.tv_nsec - (double)l.h->published_ns) / 1e9;
		kb = zcl_get(&s, "path.copy.send_bytes") + zcl_get(&s, "path.copy.recv_bytes");
		lb = zcl_get(&s, "path.local.send_bytes") + zcl_get(&s, "path.local.recv_bytes");
		xb = zcl_get(&s, "local.xchg.bytes_lent");
		paired = zcl_sum(&s, "local.paired.") + zcl_get(&s, "local.inherited");
		if (json) {
			printf("%s{\"pid\":%d,\"command\":", shown ? "," : "", pid);
			zcl_json_str(stdout, l.h->comm);
			printf(",\"age_s\":%.1f,\"sockets\":%llu,\"paired\":%llu,\"kernel_bytes\":%llu,"
			       "\"local_bytes\":%llu,\"exchange_bytes\":%llu}", age,
			       (unsigned long long)(zcl_get(&s, "sockets.created") +
						    zcl_get(&s, "sockets.accepted")),
			       (unsigned long long)paired, (unsigned long long)kb,
			       (unsigned long long)lb, (unsigned long long)xb);
		} else {
			if (!shown)
				printf("%7s  %-16s %8s %8s %7s %9s %9s %6s\n", "PID", "COMMAND", "AGE",
				       "SOCKETS", "PAIRED", "KERNEL_B", "LOCAL_B", "XCHG%");
			zcl_human(kern, sizeof(kern), (double)kb);
			zcl_human(ring, sizeof(ring), (double)lb);
			zcl_human(xchg, sizeof(xchg), lb ? 100.0 * (double)xb /
				  (double)(zcl_get(&s, "path.local.send_bytes") ?
					   zcl_get(&s, "path.local.send_bytes") : 1) : 0);
			printf("%7d  %-16.16s %7.0fs %8llu %7llu %9s %9s %6s\n", pid, l.h->comm, age,
			       (unsigned long long)(zcl_get(&s, "sockets.created") +
						    zcl_get(&s, "sockets.accepted")),
			       (unsigned long long)paired, kern, ring, xchg);
		}
		shown++;
		zcl_live_close(&l);
	}
	closedir(d);
	if (json)
		printf("]\n");
	else if (!shown)
		printf("no process of this user publishes live statistics (%s)\n", dir);
	if (stale && !json)
		fprintf(stderr, "zcsock: removed %d stale file%s (processes killed before their "
			"exit ran)\n", stale, stale == 1 ? "" : "s");
	return ZCL_EXIT_OK;
}

/* --- one process ---------------------------------------------------------------- */

/* Length of key's group (its first component). */
static size_t zcl_group_len(const char *k)
{
	const char *dot = strchr(k, '.');

	return dot ? (size_t)(dot - k) : strlen(k);
}

/* Grouped by first component, groups in the order they first appear. */
static void zcl_print_groups(const zcl_snap_t *s, int all)
{
	static char done[ZCL_KEYS_MAX];
	int i, j;

	memset(done, 0, sizeof(done));
	for (i = 0; i < s->n; i++) {
		size_t g = zcl_group_len(s->kv[i].key);
		int header = 0;

		if (done[i])
			continue;
		for (j = i; j < s->n; j++) {
			const char *k = s->kv[j].key;

			if (done[j] || zcl_group_len(k) != g || strncmp(k, s->kv[i].key, g))
				continue;
			done[j] = 1;
			if (!all && !s->kv[j].value)
				continue;
			if (!header++)
				printf("%.*s\n", (int)g, k);
			printf("  %-40s %20llu\n", k, (unsigned long long)s->kv[j].value);
		}
	}
}

static void zcl_print_json(const zcl_live_t *l, const zcl_snap_t *s, int all, const zcl_snap_t *prev)
{
	int i, first = 1;

	printf("{\"pid\":%d,\"command\":", l->pid);
	zcl_json_str(stdout, l->h->comm);
	printf(",\"version\":");
	zcl_json_str(stdout, l->h->lib_version);
	printf(",\"counters_live\":%s,\"modules_age_s\":%.3f,\"counters\":{",
	       l->h->store_live ? "true" : "false", s->text_age);
	for (i = 0; i < s->n; i++) {
		if (!all && !s->kv[i].value)
			continue;
		printf("%s\"%s\":%llu", first ? "" : ",", s->kv[i].key,
		       (unsigned long long)s->kv[i].value);
		first = 0;
	}
	printf("}");
	if (prev) {
		double dt = s->t - prev->t;

		printf(",\"interval_s\":%.3f,\"rates\":{", dt);
		for (i = 0, first = 1; i < s->n; i++) {
			uint64_t was = zcl_get(prev, s->kv[i].key);

			if (s->kv[i].value == was || dt <= 0)
				continue;
			printf("%s\"%s\":%.1f", first ? "" : ",", s->kv[i].key,
			       ((double)s->kv[i].value - (double)was) / dt);
			first = 0;
		}
		printf("}");
	}
	printf("}\n");
}

static void zcl_print_moved(const zcl_snap_t *s, const zcl_snap_t *prev)
{
	double dt = s->t - prev->t;
	int i, moved = 0;
	time_t now = time(NULL);
	char when[32];

	strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
	printf("-- %s, %.1f s\n", when, dt);
	for (i = 0; i < s->n; i++) {
		uint64_t was = zcl_get(prev, s->kv[i].key);

		if (s->kv[i].value == was)
			continue;
		printf("  %-40s %20llu %14.1f/s\n", s->kv[i].key, (unsigned long long)s->kv[i].value,
		       dt > 0 ? ((double)s->kv[i].value - (double)was) / dt : 0);
		moved++;
	}
	if (!moved)
		printf("  (nothing moved)\n");
	fflush(stdout);
}

/* --- zcsock stat PID --conns ------------------------------------------------------ */

#define ZCL_SOCKS_MAX 65536

typedef struct zcl_sock_addr {
	unsigned long ino;
	char local[64], remote[64];
	int has_bytes;                  /* TCP: the kernel's counts (sock_diag) */
	unsigned long long sent, received;
} zcl_sock_addr_t;

static zcl_sock_addr_t zcl_socks[ZCL_SOCKS_MAX];
static int zcl_nsocks;

/* "0100007F:1F90" (IPv4) or 32 hex digits (IPv6) and a port, as text. */
static void zcl_hexaddr(const char *hex, char *out, size_t size)
{
	const char *colon = strchr(hex, ':');
	unsigned port = colon ? (unsigned)strtoul(colon + 1, NULL, 16) : 0;
	size_t len = colon ? (size_t)(colon - hex) : 0;
	unsigned char b[16];
	size_t i;

	if (len != 8 && len != 32) {
		snprintf(out, size, "?");
		return;
	}
	for (i = 0; i < len / 2; i++) {
		char two[3] = { hex[2 * i], hex[2 * i + 1], 0 };

		b[i] = (unsigned char)strtoul(two, NULL, 16);
	}
	if (len == 8) {          /* one little-endian word */
		snprintf(out, size, "%u.%u.%u.%u:%u", b[3], b[2], b[1], b[0], port);
	} else {                 /* four little-endian words */
		unsigned short w[8];

		for (i = 0; i < 4; i++) {
			unsigned char *q = b + 4 * i;

			w[2 * i] = (unsigned short)(q[3] << 8 | q[2]);
			w[2 * i + 1] = (unsigned short)(q[1] << 8 | q[0]);
		}
		snprintf(out, size, "[%x:%x:%x:%x:%x:%x:%x:%x]:%u", w[0], w[1], w[2], w[3], w[4],
			 w[5], w[6], w[7], port);
	}
}

static int zcl_sock_cmp(const void *a, const void *b)
{
	unsigned long x = ((const zcl_sock_addr_t *)a)->ino, y = ((const zcl_sock_addr_t *)b)->ino;

	return x < y ? -1 : x > y;
}

/* The process's sockets by inode, from its network namespace's tables
 * (sorted by inode). */
static void zcl_socks_load(int pid)
{
	static const char *const inet[] = { "tcp", "tcp6" };
	char path[64], line[512];
	unsigned i;
	FILE *f;

	zcl_nsocks = 0;
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, inet[i]);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f) && zcl_nsocks < ZCL_SOCKS_MAX) {
			char l[80], r[80];
			unsigned long ino;

			if (sscanf(line, " %*d: %79s %79s %*x %*s %*s %*s %*d %*d %lu", l, r, &ino) != 3 ||
			    !ino)
				continue;
			zcl_socks[zcl_nsocks].ino = ino;
			zcl_hexaddr(l, zcl_socks[zcl_nsocks].local, sizeof(zcl_socks[0].local));
			zcl_hexaddr(r, zcl_socks[zcl_nsocks].remote, sizeof(zcl_socks[0].remote));
			zcl_nsocks++;
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/net/unix", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f) && zcl_nsocks < ZCL_SOCKS_MAX) {
		char name[256] = "";
		unsigned long ino;

		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &ino, name) < 1 || !ino)
			continue;
		zcl_socks[zcl_nsocks].ino = ino;
		snprintf(zcl_socks[zcl_nsocks].local, sizeof(zcl_socks[0].local), "%s",
			 name[0] ? name : "(unnamed)");
		snprintf(zcl_socks[zcl_nsocks].remote, sizeof(zcl_socks[0].remote), "-");
		zcl_nsocks++;
	}
	if (f)
		fclose(f);
	qsort(zcl_socks, (size_t)zcl_nsocks, sizeof(zcl_socks[0]), zcl_sock_cmp);
}

/* The bytes the kernel counted for each TCP socket of this network
 * namespace (sock_diag, tcp_info: bytes acked and received), into the
 * sockets loaded: the copy path's connections have no counts of the
 * library's own. */
static void zcl_tcp_bytes_load(void)
{
	static const int fams[] = { AF_INET, AF_INET6 };
	static char buf[65536];
	unsigned i;

	for (i = 0; i < 2; i++) {
		struct {
			struct nlmsghdr nlh;
			struct inet_diag_req_v2 r;
		} req;
		int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG), done = 0;

		if (fd < 0)
			return;
		memset(&req, 0, sizeof(req));
		req.nlh.nlmsg_len = sizeof(req);
		req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
		req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
		req.r.sdiag_family = (unsigned char)fams[i];
		req.r.sdiag_protocol = IPPROTO_TCP;
		req.r.idiag_states = ~0u;
		req.r.idiag_ext = 1 << (INET_DIAG_INFO - 1);
		if (send(fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
			close(fd);
			continue;
		}
		while (!done) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);
			struct nlmsghdr *h;

			if (n <= 0)
				break;
			for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
				struct inet_diag_msg *m = NLMSG_DATA(h);
				int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
				struct rtattr *a = (struct rtattr *)(m + 1);
				zcl_sock_addr_t key, *sk;

				if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
					done = 1;
					break;
				}
				key.ino = m->idiag_inode;
				sk = bsearch(&key, zcl_socks, (size_t)zcl_nsocks, sizeof(zcl_socks[0]),
					     zcl_sock_cmp);
				for (; sk && RTA_OK(a, len); a = RTA_NEXT(a, len)) {
					const struct tcp_info *ti = RTA_DATA(a);

					if (a->rta_type != INET_DIAG_INFO ||
					    RTA_PAYLOAD(a) < offsetof(struct tcp_info, tcpi_bytes_received) +
							     sizeof(ti->tcpi_bytes_received))
						continue;
					sk->has_bytes = 1;
					sk->sent = ti->tcpi_bytes_acked;
					sk->received = ti->tcpi_bytes_received;
				}
			}
		}
		close(fd);
	}
}

static const zcl_sock_addr_t *zcl_sock_of(int pid, int fd)
{
	zcl_sock_addr_t key;
	char path[64], target[64];
	unsigned long ino;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return NULL;
	target[n] = 0;
	if (sscanf(target, "socket:[%lu]", &ino) != 1)
		return NULL;
	key.ino = ino;
	return bsearch(&key, zcl_socks, (size_t)zcl_nsocks, sizeof(zcl_socks[0]), zcl_sock_cmp);
}

/* The value of key in a `key=value ...` line, "-" when absent. */
static const char *zcl_field(const char *line, const char *key, char *out, size_t size)
{
	size_t k = strlen(key);
	const char *p = line;

	while ((p = strstr(p, key))) {
		if ((p == line || p[-1] == ' ') && p[k] == '=') {
			size_t n = strcspn(p + k + 1, " \n");

			snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), p + k + 1);
			return out;
		}
		p += k;
	}
	snprintf(out, size, "-");
	return out;
}

static int zcl_stat_conns(const char *dir, zcl_live_t *l, int json)
{
	static const char *const keys[] = { "fd", "family", "type", "path", "state", "ring_tx",
					    "ring_rx", "kernel_tx", "kernel_rx", "why", "lent",
					    "exchange", "exchange_refused" };
	enum { NK = sizeof(keys) / sizeof(keys[0]) };
	static zcl_snap_t s;
	char path[ZCL_PATH_MAX], line[1024];
	struct stat st;
	int shown = 0;
	double age;
	FILE *f;

	__atomic_store_n(&l->h->conns_req, 1, __ATOMIC_RELEASE);
	zcl_live_snap(l, 1000, &s);
	snprintf(path, sizeof(path), "%s/%d.conns", dir, l->pid);
	f = fopen(path, "r");
	if (!f || fstat(fileno(f), &st)) {
		fprintf(stderr, "zcsock: pid %d has not called into the library since it was asked "
			"for its connections (it answers at its next call)\n", l->pid);
		if (f)
			fclose(f);
		return ZCL_EXIT_FAIL;
	}
	age = difftime(time(NULL), st.st_mtime);
	zcl_socks_load(l->pid);
	zcl_tcp_bytes_load();
	if (json)
		printf("{\"pid\":%d,\"age_s\":%.0f,\"connections\":[", l->pid, age);
	else
		printf("%5s %-6s %-22s %-22s %-8s %-11s %9s %9s %9s %9s  %s\n", "FD", "FAMILY", "LOCAL",
		       "REMOTE", "PATH", "STATE", "RING_TX", "RING_RX", "KERN_TX", "KERN_RX", "WHY");
	while (fgets(line, sizeof(line), f)) {
		char v[NK][64], note[200];
		const zcl_sock_addr_t *a;
		unsigned i;

		for (i = 0; i < NK; i++)
			zcl_field(line, keys[i], v[i], sizeof(v[i]));
		a = zcl_sock_of(l->pid, atoi(v[0]));
		if (a && a->has_bytes && !strcmp(v[7], "-")) {   /* the kernel's own counts */
			snprintf(v[7], sizeof(v[7]), "%llu", a->sent);
			snprintf(v[8], sizeof(v[8]), "%llu", a->received);
		}
		if (json) {
			printf("%s{\"local\":", shown ? "," : "");
			zcl_json_str(stdout, a ? a->local : "");
			printf(",\"remote\":");
			zcl_json_str(stdout, a ? a->remote : "");
			for (i = 0; i < NK; i++) {
				printf(",\"%s\":", keys[i]);
				if (strcmp(v[i], "-") && strspn(v[i], "0123456789") == strlen(v[i]))
					printf("%s", v[i]);
				else if (strcmp(v[i], "-"))
					zcl_json_str(stdout, v[i]);
				else
					printf("null");
			}
			printf("}");
		} else {
			snprintf(note, sizeof(note), "%s%s%s%s%s%s%s", v[9],
				 strcmp(v[10], "-") ? " lent=" : "", strcmp(v[10], "-") ? v[10] : "",
				 strcmp(v[11], "-") ? " exchange=" : "", strcmp(v[11], "-") ? v[11] : "",
				 strcmp(v[12], "-") ? " exchange_refused=" : "",
				 strcmp(v[12], "-") ? v[12] : "");
			printf("%5s %-6s %-22s %-22s %-8s %-11s %9s %9s %9s %9s  %s\n", v[0], v[1],
			       a ? a->local : "?", a ? a->remote : "?", v[3], v[4], v[5], v[6], v[7], v[8],
			       note);
		}
		shown++;
	}
	fclose(f);
	if (json)
		printf("]}\n");
	else if (age > 1)
		printf("(the list is %.0f s old: the process has not called into the library since)\n",
		       age);
	return ZCL_EXIT_OK;
}

/* For the advice rules (advise.c). */
uint64_t zcl_stat_get(const zcl_snap_t *s, const char *key)
{
	return zcl_get(s, key);
}

int zcl_cmd_stat(int argc, char **argv)
{
	char dir[ZCL_PATH_MAX];
	int i, pid = 0, json = 0, all = 0, advise = 0, watch = 0, count = -1, conns = 0, rc;
	double every = 1;
	static zcl_snap_t s, prev;
	zcl_live_t l;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(zcl_stat_usage, stdout);
			return ZCL_EXIT_OK;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--all")) {
			all = 1;
		} else if (!strcmp(a, "--advise")) {
			advise = 1;
		} else if (!strcmp(a, "--conns")) {
			conns = 1;
		} else if (!strcmp(a, "--watch")) {
			watch = 1;
			if (i + 1 < argc && isdigit((unsigned char)argv[i + 1][0]) && pid) {
				every = atof(argv[++i]);
				if (every < 0.05 || every > 3600)
					zcl_usage_fail("stat: --watch takes 0.05 to 3600 seconds, not '%s'",
						       argv[i]);
			}
		} else if (!strcmp(a, "--count")) {
			if (i + 1 >= argc || (count = atoi(argv[++i])) <= 0)
				zcl_usage_fail("stat: --count takes a positive number");
		} else if (a[0] != '-' && !pid && strspn(a, "0123456789") == strlen(a) && atoi(a) > 0) {
			pid = atoi(a);
		} else {
			zcl_usage_fail("stat: unexpected argument '%s'", a);
		}
	}
	if (!pid && (watch || advise || all || conns))
		zcl_usage_fail("stat: --watch, --advise, --conns and --all need a PID");
	if (conns + advise + watch > 1)
		zcl_usage_fail("stat: one of --watch, --advise and --conns at a time");
	if (count > 0 && !watch)
		zcl_usage_fail("stat: --count goes with --watch");
	rc = zc_live_dir(dir, sizeof(dir), 0);
	if (rc == -EPERM) {
		fprintf(stderr, "zcsock: %s is not a private directory of this user: the library "
			"publishes nothing there, and nothing in it is read\n", dir);
		return ZCL_EXIT_FAIL;
	}
	if (!pid)
		return zcl_stat_list(dir, json);
	rc = zcl_live_open(dir, pid, &l);
	if (rc) {
		fprintf(stderr, "zcsock: no live statistics for pid %d%s (in %s: a process of "
			"this user under libzcsock.so publishes them at its first socket, unless "
			"ZCSOCK_LIVE=0)\n", pid, rc == -ESTALE ? ": its file was stale (the process "
			"was killed or is gone) and is removed" : kill(pid, 0) == 0 || errno == EPERM ?
			"" : ": no such process", dir);
		return ZCL_EXIT_FAIL;
	}
	if (conns) {
		rc = zcl_stat_conns(dir, &l, json);
		zcl_live_close(&l);
		return rc;
	}
	zcl_live_snap(&l, ZCL_ANSWER_MS, &s);
	if (advise) {
		zcl_advise(&s, stdout);
	} else if (!watch) {
		if (json) {
			zcl_print_json(&l, &s, all, NULL);
		} else {
			printf("pid %d (%s), libzcsock %s%s\n", pid, l.h->comm, l.h->lib_version,
			       s.text_age < 0 ? ", modules' counters not written yet" : "");
			if (s.text_age > 1)
				printf("(modules' counters as of %.0f s ago: the process has not called "
				       "into the library since)\n", s.text_age);
			zcl_print_groups(&s, all);
		}
	} else {
		for (i = 0; count < 0 || i < count; i++) {
			prev = s;
			zcl_sleep_ms((int)(every * 1000));
			if (zcl_starttime(pid) != l.h->starttime) {
				fprintf(stderr, "zcsock: pid %d ended\n", pid);
				break;
			}
			zcl_live_snap(&l, ZCL_ANSWER_MS, &s);
			if (json)
				zcl_print_json(&l, &s, all, &prev);
			else
				zcl_print_moved(&s, &prev);
		}
	}
	zcl_live_close(&l);
	return ZCL_EXIT_OK;
}

/* --- zcsock top ---------------------------------------------------------------- */

typedef struct zcl_top_row {
	int pid;
	char comm[32];
	uint64_t paired, kern, local, lent, calls;     /* totals */
	double kern_r, local_r, lent_r, calls_r;       /* per second since the last screen */
} zcl_top_row_t;

#define ZCL_TOP_MAX 512

static const char zcl_top_usage[] =
	"usage: zcsock top [--interval S] [--count N] [--sort bytes|avoided|calls|pid]\n"
	"\n"
	"Every process of this user under libzcsock.so, refreshed every S seconds\n"
	"(default 2), like top(1): bytes per second by path (copied through the\n"
	"kernel, through the local path's ring, lent by page exchange), calls per\n"
	"second, connections paired, and the bytes that did not go through the\n"
	"kernel's copies so far (AVOIDED).  --sort: bytes (per second, the\n"
	"default), avoided, calls or pid.  --count N: stop after N screens.\n"
	"On a terminal the screen is redrawn; otherwise screens follow each other.\n";

static int zcl_top_cmp_key;

static int zcl_top_cmp(const void *a, const void *b)
{
	const zcl_top_row_t *x = a, *y = b;
	double u, v;

	switch (zcl_top_cmp_key) {
	case 1:
		u = (double)(x->local + x->lent);
		v = (double)(y->local + y->lent);
		break;
	case 2:
		u = x->calls_r;
		v = y->calls_r;
		break;
	case 3:
		return x->pid - y->pid;
	default:
		u = x->kern_r + x->local_r;
		v = y->kern_r + y->local_r;
	}
	return u < v ? 1 : u > v ? -1 : x->pid - y->pid;
}

/* Every process's totals now; rates against prev (n_prev rows). */
static int zcl_top_read(const char *dir, zcl_top_row_t *rows, const zcl_top_row_t *prev,
			int n_prev, double dt)
{
	static zcl_snap_t s;
	struct dirent *e;
	DIR *d = opendir(dir);
	int n = 0, k;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < ZCL_TOP_MAX) {
		int pid = atoi(e->d_name);
		zcl_top_row_t *r = &rows[n];
		zcl_live_t l;

		if (pid <= 0 || strspn(e->d_name, "0123456789") != strlen(e->d_name) ||
		    zcl_live_open(dir, pid, &l))
			continue;
		zcl_live_snap(&l, -1, &s);
		memset(r, 0, sizeof(*r));
		r->pid = pid;
		snprintf(r->comm, sizeof(r->comm), "%s", l.h->comm);
		r->paired = zcl_sum(&s, "local.paired.") + zcl_get(&s, "local.inherited");
		r->kern = zcl_get(&s, "path.copy.send_bytes") + zcl_get(&s, "path.copy.recv_bytes");
		r->local = zcl_get(&s, "path.local.send_bytes") + zcl_get(&s, "path.local.recv_bytes");
		r->lent = zcl_get(&s, "local.xchg.bytes_lent");
		r->calls = zcl_sum(&s, "calls.");
		zcl_live_close(&l);
		for (k = 0; k < n_prev && dt > 0; k++) {
			const zcl_top_row_t *p = &prev[k];

			if (p->pid != pid)
				continue;
			r->kern_r = (double)(r->kern - p->kern) / dt;
			r->local_r = (double)(r->local - p->local) / dt;
			r->lent_r = (double)(r->lent - p->lent) / dt;
			r->calls_r = (double)(r->calls - p->calls) / dt;
		}
		n++;
	}
	closedir(d);
	return n;
}

int zcl_cmd_top(int argc, char **argv)
{
	static zcl_top_row_t rows[ZCL_TOP_MAX], prev[ZCL_TOP_MAX];
	char dir[ZCL_PATH_MAX], a[16], b[16], c[16], d[16];
	int i, n = 0, n_prev = 0, count = -1, screen, tty = isatty(1);
	double every = 2, t_prev = 0;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *v;

		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			fputs(zcl_top_usage, stdout);
			return ZCL_EXIT_OK;
		} else if (zcl_opt_value(argc, argv, &i, "--interval", &v)) {
			every = atof(v);
			if (every < 0.1 || every > 3600)
				zcl_usage_fail("top: --interval takes 0.1 to 3600 seconds, not '%s'", v);
		} else if (zcl_opt_value(argc, argv, &i, "--count", &v)) {
			if ((count = atoi(v)) <= 0)
				zcl_usage_fail("top: --count takes a positive number, not '%s'", v);
		} else if (zcl_opt_value(argc, argv, &i, "--sort", &v)) {
			if (!strcmp(v, "bytes"))
				zcl_top_cmp_key = 0;
			else if (!strcmp(v, "avoided"))
				zcl_top_cmp_key = 1;
			else if (!strcmp(v, "calls"))
				zcl_top_cmp_key = 2;
			else if (!strcmp(v, "pid"))
				zcl_top_cmp_key = 3;
			else
				zcl_usage_fail("top: --sort takes bytes, avoided, calls or pid, not '%s'", v);
		} else {
			zcl_usage_fail("top: unexpected argument '%s'", arg);
		}
	}
	if (zc_live_dir(dir, sizeof(dir), 0) == -EPERM) {
		fprintf(stderr, "zcsock: %s is not a private directory of this user: the library "
			"publishes nothing there, and nothing in it is read\n", dir);
		return ZCL_EXIT_FAIL;
	}
	for (screen = 0; count < 0 || screen < count; screen++) {
		double t = zcl_now();
		time_t now = time(NULL);
		char when[32];

		n = zcl_top_read(dir, rows, prev, n_prev, screen ? t - t_prev : 0);
		qsort(rows, (size_t)n, sizeof(rows[0]), zcl_top_cmp);
		strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
		if (tty)
			printf("\033[H\033[2J");
		printf("zcsock top - %s, %d process%s, every %.1f s%s\n", when, n, n == 1 ? "" : "es",
		       every, screen ? "" : " (rates from the next screen)");
		printf("%7s  %-16s %6s %10s %10s %10s %9s %10s\n", "PID", "COMMAND", "PAIRED",
		       "KERNEL/s", "LOCAL/s", "LENT/s", "CALLS/s", "AVOIDED");
		for (i = 0; i < n; i++) {
			zcl_human(a, sizeof(a), rows[i].kern_r);
			zcl_human(b, sizeof(b), rows[i].local_r);
			zcl_human(c, sizeof(c), rows[i].lent_r);
			zcl_human(d, sizeof(d), (double)(rows[i].local + rows[i].lent));
			printf("%7d  %-16.16s %6llu %10s %10s %10s %9.0f %10s\n", rows[i].pid,
			       rows[i].comm, (unsigned long long)rows[i].paired, a, b, c,
			       rows[i].calls_r, d);
		}
		fflush(stdout);
		memcpy(prev, rows, sizeof(rows[0]) * (size_t)n);
		n_prev = n;
		t_prev = t;
		if (count < 0 || screen + 1 < count)
			zcl_sleep_ms((int)(every * 1000));
	}
	return ZCL_EXIT_OK;
}
