/* Live statistics, the library's side: see zc_live.h.
 *
 * Publication makes the file (a temporary name, then renamed: a reader
 * never sees half of it), writes the header, the keys and the counters as
 * they are, and maps the file's store over the shim's own counter pages
 * (MAP_FIXED), so that every later count lands in the file: only in a
 * process with one thread (another's count made between the copy and the
 * mapping would be lost).  So the file is made, under its temporary name
 * and not yet listed, before a process's first pthread_create
 * (zc_live_stage), and renamed at its first socket; a process that became
 * multi-threaded some other way before its first socket publishes its
 * counters through the report text instead (store_live 0).  System calls go
 * straight to the kernel (zc_sys.h): the library's own hooks never run
 * here. */
#include "zc_live.h"

#include <fcntl.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/mman.h>
#include <time.h>

#include "zc_config.h"
#include "zc_log.h"
#include "zc_stats.h"
#include "zc_sys.h"

zc_live_hdr_t *zc_live;
static size_t zc_live_front;            /* header, keys and text: mapped at zc_live */
static char zc_live_path[200], zc_live_tmp[220];
/* Made but not yet published (zc_live_stage: before a process's first
 * thread, so that its counters can live in the file from the start). */
static zc_live_hdr_t *zc_live_staged;
ZC_FORK_DATA static int zc_live_lock;
static int zc_live_off, zc_live_sealed;
static int zc_live_mapped;              /* the store is the file's (store_live) */
ZC_FORK_DATA static int zc_live_child;  /* a fork child (zc_live_fork_child) */
#define ZC_LIVE_SWEEP_EVERY 16
int (*zc_live_seccomp_mode)(void);
/* The file's layout as we made it: never read back from the file, which
 * any process of this user may write into (only the request words are
 * read from it, and bounded). */
static uint64_t zc_live_names_off, zc_live_text_off;
static uint64_t zc_live_text_ns, zc_live_conns_ns;  /* the last answers (rate bound) */
#define ZC_LIVE_TEXT_EVERY_NS 5000000ull        /* a text at most every 5 ms */
#define ZC_LIVE_CONNS_EVERY_NS 100000000ull     /* a connection list every 100 ms */
size_t (*zc_live_extra)(char *buf, size_t size);
void (*zc_live_conns_fn)(int out);

#define ZC_LIVE_ALIGN(x) (((x) + 4095) & ~(uint64_t)4095)

/* /proc/self/stat's field 22 (start time), 0 when unreadable. */
static uint64_t zc_live_starttime(char *comm, size_t commsz)
{
    char buf[1024], *p;
    long fd = zc_sys(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
    long n;
    int field;
    uint64_t v = 0;

    if (fd < 0)
        return 0;
    n = zc_sys(SYS_read, fd, buf, sizeof(buf) - 1);
    zc_sys(SYS_close, fd, 0, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    p = strchr(buf, '(');
    if (p) {
        char *e = strrchr(p, ')');
        size_t k = e ? (size_t)(e - p - 1) : 0;

        if (k >= commsz)
            k = commsz - 1;
        memcpy(comm, p + 1, k);
        comm[k] = 0;
        p = e;
    }
    /* after the ")": field 3 onwards, space separated */
    for (field = 2; p && *p && field < 22; p++)
        if (*p == ' ')
            field++;
    while (p && *p >= '0' && *p <= '9')
        v = v * 10 + (uint64_t)(*p++ - '0');
    return v;
}

static uint64_t zc_live_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int zc_live_write_all(long fd, const void *p, size_t n, uint64_t off)
{
    while (n) {
        long w = zc_sys6(SYS_pwrite64, fd, (long)p, (long)n, (long)off, 0, 0);

        if (w == -EINTR)
            continue;
        if (w <= 0)
            return -1;
        p = (const char *)p + w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* Said once; the process stays unpublished (no retry per socket). */
int zc_live_write_fd(int fd, const char *buf, size_t n)
{
    while (n) {
        long w = zc_sys(SYS_write, fd, buf, n);

        if (w == -EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The connection list asked for: <path>.conns, whole or not at all. */
static void zc_live_conns_write(void)
{
    char tmp[230], dst[230];
    long fd;

    if (!zc_live_conns_fn)
        return;
    zc_fmt(tmp, sizeof(tmp), "%s.conns.new", zc_live_path);
    zc_fmt(dst, sizeof(dst), "%s.conns", zc_live_path);
    fd = zc_sys(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    zc_sys(SYS_fchmod, fd, 0600, 0);
    zc_live_conns_fn((int)fd);
    zc_sys(SYS_close, fd, 0, 0);
    zc_sys6(SYS_renameat, AT_FDCWD, (long)tmp, AT_FDCWD, (long)dst, 0, 0);
}

static void zc_live_fail(const char *what, long err)
{
    if (!__atomic_exchange_n(&zc_live_off, 1, __ATOMIC_RELAXED))
        zc_log(ZC_LOG_NOTICE, "live statistics off for this process: %s (%s); "
               "zcsock stat will not list it", what, strerror((int)-err));
}

/* An aux counter named after publication: its key into the file (the
 * slot's count is published only after, so a reader finds it named). */
static void zc_live_aux_named(unsigned i, const char *name)
{
    zc_live_hdr_t *h = __atomic_load_n(&zc_live, __ATOMIC_ACQUIRE);

    if (!h)
        h = __atomic_load_n(&zc_live_staged, __ATOMIC_ACQUIRE);

    if (h && i < ZC_STATS_AUX)
        zc_fmt((char *)h + zc_live_names_off + (uint64_t)(ZC_STAT_COUNT + i) * ZC_LIVE_NAME_LEN,
               ZC_LIVE_NAME_LEN, "%s", name);
}

long zc_dir_decimal(void *arg, const char *name, const char **rest)
{
    const char *p = name + (*name == '.');
    long pid = 0;

    (void)arg;
    for (; *p >= '0' && *p <= '9' && pid < (1L << 31); p++)
        pid = pid * 10 + (*p - '0');
    *rest = p;
    return pid;
}

void zc_dir_gone(const char *dir, zc_dir_pid_fn decode, void *darg, zc_dir_gone_fn fn,
                 void *arg)
{
    char buf[4096];
    long fd = zc_sys(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long n, off;
    int looked = 0;

    if (fd < 0)
        return;
    n = zc_sys(SYS_getdents64, fd, buf, sizeof(buf));
    for (off = 0; n > 0 && off < n && looked < 64;) {
        struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type;
                 char name[]; } *d = (void *)(buf + off);
        const char *rest;
        long pid;

        if (!d->reclen)
            break;
        off += d->reclen;
        pid = decode(darg, d->name, &rest);
        if (pid <= 0)
            continue;
        looked++;
        if (zc_sys(SYS_kill, pid, 0, 0) == -ESRCH)
            fn(arg, (int)fd, d->name, rest);
    }
    zc_sys(SYS_close, fd, 0, 0);
}

void zc_dir_gone_pids(const char *dir, zc_dir_gone_fn fn, void *arg)
{
    zc_dir_gone(dir, zc_dir_decimal, NULL, fn, arg);
}

/* Files of processes that are gone (killed: no exit ran), published or
 * only made (.<pid>.new), and their connection lists, go when the next
 * process publishes.  (A pid reused since is left to zcsock stat, which
 * compares start times.) */
static void zc_live_gone(void *arg, int dirfd, const char *name, const char *rest)
{
    (void)arg;
    if (name[0] == '.' ? strcmp(rest, ".new")
                       : *rest && strcmp(rest, ".conns") && strcmp(rest, ".conns.new"))
        return;
    zc_sys(SYS_unlinkat, dirfd, name, 0);
}

static void zc_live_sweep(const char *dir)
{
    zc_dir_gone_pids(dir, zc_live_gone, NULL);
}

/* The bytes of the store in use: up to the last block claimed. */
static size_t zc_live_used(void)
{
    uint32_t used = __atomic_load_n(&zc_stats_store.s.blocks_used, __ATOMIC_RELAXED);

    if (used > ZC_STATS_BLOCKS)
        used = ZC_STATS_BLOCKS;
    return offsetof(zc_stats_store_t, blocks) + used * sizeof(zc_stats_block_t);
}

/* The file made under its temporary name (.<pid>.new) and its front
 * mapped: the header, the keys, and, in a process with one thread, the
 * counters as they are with the file's pages mapped over the shim's own
 * (zc_live_mapped).  Called with zc_live_lock held; 0 or -errno (said). */
static long zc_live_stage_locked(void)
{
    char dir[160], comm[32] = "";
    zc_live_hdr_t h;
    uint64_t names_off, text_off, store_off, size;
    size_t front;
    long fd, rc, m;
    unsigned i;

    rc = zc_live_dir(dir, sizeof(dir), 1);
    if (rc) {
        zc_live_fail(rc == -EPERM ? "its directory is not a private one of this user"
                                  : "no directory for it", rc == -EPERM ? -EACCES : rc);
        return rc;
    }
    names_off = 4096;
    text_off = ZC_LIVE_ALIGN(names_off + (uint64_t)(ZC_STAT_COUNT + ZC_STATS_AUX) *
                                         ZC_LIVE_NAME_LEN);
    store_off = ZC_LIVE_ALIGN(text_off + ZC_LIVE_TEXT_SIZE);
    size = store_off + ZC_STATS_STORE_SIZE;
    front = (size_t)store_off;
    memset(&h, 0, sizeof(h));
    h.magic = ZC_LIVE_MAGIC;
    h.version = ZC_LIVE_VERSION;
    h.hdr_size = sizeof(h);
    h.pid = (int32_t)zc_sys(SYS_getpid, 0, 0, 0);
    h.uid = (uint32_t)geteuid();
    h.starttime = zc_live_starttime(comm, sizeof(comm));
    memcpy(h.comm, comm, sizeof(h.comm));
    zc_fmt(h.lib_version, sizeof(h.lib_version), "%s", ZCSOCK_VERSION);
    h.nstats = ZC_STAT_COUNT;
    h.nblocks = ZC_STATS_BLOCKS;
    h.names_off = names_off;
    h.text_off = text_off;
    h.store_off = store_off;
    h.store_size = ZC_STATS_STORE_SIZE;
    h.shared_off = offsetof(zc_stats_store_t, shared);
    h.blocks_used_off = offsetof(zc_stats_store_t, blocks_used);
    h.blocks_off = offsetof(zc_stats_store_t, blocks);
    h.block_stride = sizeof(zc_stats_block_t);
    h.naux_off = offsetof(zc_stats_store_t, naux);
    h.aux_off = offsetof(zc_stats_store_t, aux);
    h.aux_max = ZC_STATS_AUX;
    zc_fmt(zc_live_path, sizeof(zc_live_path), "%s/%d", dir, (int)h.pid);
    zc_fmt(zc_live_tmp, sizeof(zc_live_tmp), "%s/.%d.new", dir, (int)h.pid);
    fd = zc_sys(SYS_openat, AT_FDCWD, zc_live_tmp,
                O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        zc_live_fail("cannot make its file", fd);
        return fd;
    }
    zc_sys(SYS_fchmod, fd, 0600, 0);
    /* the blocks reserved now: a full tmpfs fails here, never as a SIGBUS
     * when a count or a key first touches a page of the mapping (nor in a
     * reader: a read fault on a hole of a tmpfs mapping takes a page too) */
    rc = zc_sys6(SYS_fallocate, fd, 0, 0, (long)size, 0, 0);
    if (rc == -EOPNOTSUPP)
        rc = zc_sys(SYS_ftruncate, fd, size, 0);
    m = rc ? rc : zc_sys6(SYS_mmap, 0, (long)front, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m < 0 && m > -4096) {
        zc_sys(SYS_close, fd, 0, 0);
        zc_sys(SYS_unlinkat, AT_FDCWD, zc_live_tmp, 0);
        zc_live_fail("cannot write its file", m);
        return m;
    }
    /* the keys and the header through the mapping: no system call each */
    for (i = 0; i < ZC_STAT_COUNT + ZC_STATS_AUX; i++) {
        const char *name = i < ZC_STAT_COUNT ? zc_stat_name(i) : zc_stats_aux_name(i - ZC_STAT_COUNT);

        if (name)
            zc_fmt((char *)m + names_off + (uint64_t)i * ZC_LIVE_NAME_LEN, ZC_LIVE_NAME_LEN,
                   "%s", name);
    }
    memcpy((void *)m, &h, sizeof(h));
    /* the counters as they are (the blocks no thread claimed stay holes),
     * then the file's pages in their place; only while no other thread
     * can count meanwhile (a count made between the copy and the mapping
     * would be lost): otherwise the counters go by the report text */
    rc = 0;
    if (__libc_single_threaded) {
        rc = zc_live_write_all(fd, &zc_stats_store, zc_live_used(), store_off);
        if (rc == 0)
            rc = zc_sys6(SYS_mmap, (long)&zc_stats_store, ZC_STATS_STORE_SIZE,
                         PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (long)store_off);
        if (rc >= 0 || rc <= -4096) {
            zc_live_mapped = 1;
            ((zc_live_hdr_t *)m)->store_live = 1;
        }
    }
    zc_sys(SYS_close, fd, 0, 0);
    if (rc < 0 && rc > -4096) {
        zc_sys(SYS_munmap, m, (long)front, 0);
        zc_sys(SYS_unlinkat, AT_FDCWD, zc_live_tmp, 0);
        zc_live_fail("cannot map its file", rc);
        return rc;
    }
    zc_live_front = front;
    zc_live_names_off = names_off;
    zc_live_text_off = text_off;
    zc_stats_aux_named = zc_live_aux_named;
    __atomic_store_n(&zc_live_staged, (zc_live_hdr_t *)m, __ATOMIC_RELEASE);
    return 0;
}

/* May this process make its file now?  (Not with live statistics off,
 * after a failure said once, under a seccomp filter.)  Takes the lock. */
static int zc_live_begin(void)
{
    if (!zc_config.live || zc_live_off || __atomic_load_n(&zc_live_sealed, __ATOMIC_ACQUIRE) ||
        __atomic_exchange_n(&zc_live_lock, 1, __ATOMIC_ACQUIRE))
        return 0;
    if (zc_live_seccomp_mode && zc_live_seccomp_mode() > 0) {
        zc_live_sealed = 1;     /* started under a filter: no file at all */
        __atomic_store_n(&zc_live_lock, 0, __ATOMIC_RELEASE);
        return 0;
    }
    return 1;
}

void zc_live_stage(void)
{
    if (!__libc_single_threaded || zc_live || zc_live_staged || !zc_live_begin())
        return;
    if (!zc_live && !zc_live_staged)    /* again, under the lock */
        zc_live_stage_locked();
    __atomic_store_n(&zc_live_lock, 0, __ATOMIC_RELEASE);
}

void zc_live_publish(void)
{
    char dir[160];
    zc_live_hdr_t *m;

    if (!zc_live_begin())
        return;
    __atomic_store_n(&zc_live_waiting, 0, __ATOMIC_RELAXED);
    if (zc_live || (!zc_live_staged && zc_live_stage_locked()))
        goto out;
    m = zc_live_staged;
    m->published_ns = zc_live_now_ns();
    zc_sys6(SYS_renameat, AT_FDCWD, (long)zc_live_tmp, AT_FDCWD, (long)zc_live_path, 0, 0);
    __atomic_store_n(&zc_live, m, __ATOMIC_RELEASE);
    __atomic_store_n(&zc_live_staged, NULL, __ATOMIC_RELEASE);
    /* (a forking server's children: one in ZC_LIVE_SWEEP_EVERY sweeps, each
     * looking at every file of the directory, a kill each) */
    if ((!zc_live_child || m->pid % ZC_LIVE_SWEEP_EVERY == 0) &&
        zc_live_dir(dir, sizeof(dir), 0) == 0)
        zc_live_sweep(dir);
out:
    __atomic_store_n(&zc_live_lock, 0, __ATOMIC_RELEASE);
}

ZC_FORK_DATA int zc_live_waiting;

ZC_FORK_CODE void zc_live_publish_later(void)
{
    if (!__atomic_load_n(&zc_live_sealed, __ATOMIC_ACQUIRE))
        __atomic_store_n(&zc_live_waiting, 1, __ATOMIC_RELAXED);
}

/* The counter pages become private again, the file's front unmapped.  What
 * they hold is kept up to the first block (the shared and aux counters,
 * the number of blocks claimed), and the blocks claimed too when all. */
static void zc_live_detach(int all)
{
    zc_live_hdr_t *h = zc_live ? zc_live : zc_live_staged;
    uint32_t used = zc_stats_store.s.blocks_used;
    size_t keep = offsetof(zc_stats_store_t, blocks) +
                  (all ? (used < ZC_STATS_BLOCKS ? used : ZC_STATS_BLOCKS) * sizeof(zc_stats_block_t)
                       : 0);
    long copy;
    char small[4096] __attribute__((aligned(64)));

    if (!h)
        return;
    zc_live = NULL;
    zc_live_staged = NULL;
    if (!zc_live_mapped) {      /* the counters never left their pages */
        zc_sys(SYS_munmap, (long)h, (long)zc_live_front, 0);
        return;
    }
    zc_live_mapped = 0;
    /* a fork child keeps the header alone: on the stack, two system calls
     * fewer per child of a forking server */
    if (keep <= sizeof(small))
        copy = (long)small;
    else
        copy = zc_sys6(SYS_mmap, 0, (long)keep, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy < 0 && copy > -4096)
        copy = -1;
    else
        memcpy((void *)copy, &zc_stats_store, keep);
    if (zc_sys6(SYS_mmap, (long)&zc_stats_store, ZC_STATS_STORE_SIZE, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == (long)&zc_stats_store &&
        copy != -1)
        memcpy(&zc_stats_store, (void *)copy, keep);
    if (copy != -1 && copy != (long)small)
        zc_sys(SYS_munmap, copy, (long)keep, 0);
    zc_sys(SYS_munmap, (long)h, (long)zc_live_front, 0);
}

void zc_live_seal(void)
{
    __atomic_store_n(&zc_live_sealed, 1, __ATOMIC_RELEASE);
}

ZC_FORK_CODE void zc_live_exit(void)
{
    char conns[230];

    if (__atomic_load_n(&zc_live_sealed, __ATOMIC_ACQUIRE))
        return;
    if (zc_live_staged)         /* made, never published */
        zc_sys(SYS_unlinkat, AT_FDCWD, zc_live_tmp, 0);
    if (!zc_live)
        return;
    zc_sys(SYS_unlinkat, AT_FDCWD, zc_live_path, 0);
    zc_fmt(conns, sizeof(conns), "%s.conns", zc_live_path);
    zc_sys(SYS_unlinkat, AT_FDCWD, conns, 0);
}

void zc_live_exec_failed(void)
{
    int was = zc_live != NULL;

    if ((!zc_live && !zc_live_staged) || __atomic_load_n(&zc_live_sealed, __ATOMIC_ACQUIRE))
        return;
    zc_live_detach(1);
    if (was)
        zc_live_publish();
    else
        zc_live_stage();
}

ZC_FORK_CODE int zc_live_fork_child(void)
{
    int was = zc_live != NULL || zc_live_waiting;

    zc_live_lock = 0;
    zc_live_waiting = 0;
    zc_live_child = 1;
    if (!zc_live && !zc_live_staged)
        return was;             /* (a waiting child's child waits too) */
    zc_live_detach(0);          /* the parent's file (published or staged) */
    return was;
}

/* A reader asked (want != done).  Another process of this user may ask
 * without end: a text is written at most every 5 ms and a connection list
 * every 100 ms; a request made sooner waits for a later call. */
void zc_live_answer(void)
{
    static char buf[ZC_LIVE_TEXT_SIZE];
    zc_live_hdr_t *h = zc_live;
    uint64_t now;
    uint32_t want;
    size_t n;

    if (!h || __atomic_load_n(&zc_live_sealed, __ATOMIC_ACQUIRE) ||
        __atomic_exchange_n(&zc_live_lock, 1, __ATOMIC_ACQUIRE))
        return;
    now = zc_live_now_ns();
    if (now - zc_live_text_ns < ZC_LIVE_TEXT_EVERY_NS) {
        __atomic_store_n(&zc_live_lock, 0, __ATOMIC_RELEASE);
        return;
    }
    zc_live_text_ns = now;
    want = __atomic_load_n(&h->want, __ATOMIC_ACQUIRE);
    n = zc_stats_format(buf, sizeof(buf), "live", 0);
    if (zc_live_extra && n < sizeof(buf))
        n += zc_live_extra(buf + n, sizeof(buf) - n);
    if (n > ZC_LIVE_TEXT_SIZE)
        n = ZC_LIVE_TEXT_SIZE;
    __atomic_add_fetch(&h->text_seq, 1, __ATOMIC_ACQ_REL);      /* odd: writing */
    memcpy((char *)h + zc_live_text_off, buf, n);
    h->text_len = (uint32_t)n;
    h->text_ns = now;
    __atomic_add_fetch(&h->text_seq, 1, __ATOMIC_RELEASE);      /* even: whole */
    if (__atomic_load_n(&h->conns_req, __ATOMIC_ACQUIRE) &&
        now - zc_live_conns_ns >= ZC_LIVE_CONNS_EVERY_NS) {
        __atomic_store_n(&h->conns_req, 0, __ATOMIC_RELEASE);
        zc_live_conns_ns = now;
        zc_live_conns_write();
    }
    __atomic_store_n(&h->done, want, __ATOMIC_RELEASE);
    __atomic_store_n(&zc_live_lock, 0, __ATOMIC_RELEASE);
}
