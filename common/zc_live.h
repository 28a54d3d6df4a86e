/* Live statistics: each process under the library that uses sockets
 * publishes its counters in a file of its own, which `zcsock stat` reads
 * while the process runs (no ptrace, no signal, nothing asked of it).
 *
 * Where: <dir>/<pid>, dir = $XDG_RUNTIME_DIR/zcsock when that is a
 * directory of ours (mode 0700), else /run/user/<uid>/zcsock, else
 * /dev/shm/zcsock-<uid> (/tmp/zcsock-<uid> where /dev/shm is missing or
 * under 1 GiB, zc_live_shm_ok: daemons have no XDG_RUNTIME_DIR, and /tmp
 * is often a disk, where every process's counters were written back and
 * each file or mailbox made and removed went through the journal); made
 * 0700, and used only when it is a real directory owned by this user with
 * no access for others (a name another user made first is refused, never
 * followed).  Files are 0600: only the same user
 * (and root) reads them.
 *
 * Layout (all little-endian native words; the reader checks magic, version
 * and every offset against the file's size):
 *   [0, 4096)           zc_live_hdr_t
 *   [names_off, ...)    nstats + aux_max keys of ZC_LIVE_NAME_LEN bytes each
 *                       (the aux ones named as the modules add them)
 *   [text_off, ...)     ZC_LIVE_TEXT_SIZE bytes: the last full report
 *                       (`key: value` lines, the modules' counters included),
 *                       written on request (want/done) under text_seq
 *   [store_off, ...)    the shim's counters themselves (zc_stats_store_t),
 *                       mapped over the process's own: live
 * The counters of a key are store.shared[i] plus blocks[b].v[i] for b <
 * min(blocks_used, nblocks), each block block_stride bytes apart; aux key
 * i (< the store's naux, a uint32_t at naux_off) is store.aux[i]. */
#ifndef ZC_LIVE_H
#define ZC_LIVE_H

#include <stddef.h>
#include <stdint.h>

#define ZC_LIVE_MAGIC 0x31766c4c6373637aULL   /* "zcscLlv1" */
#define ZC_LIVE_VERSION 1
#define ZC_LIVE_NAME_LEN 48
#define ZC_LIVE_TEXT_SIZE (48 * 1024)

typedef struct zc_live_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t hdr_size;
    int32_t pid;
    uint32_t uid;
    uint64_t starttime;         /* /proc/<pid>/stat field 22: tells a reused pid */
    uint64_t published_ns;      /* CLOCK_REALTIME of the publication */
    char comm[32];              /* the program (its comm at publication) */
    char lib_version[32];
    uint32_t nstats;            /* keys, and counters per block */
    uint32_t nblocks;
    uint64_t names_off;
    uint64_t text_off;
    uint64_t store_off;
    uint64_t store_size;
    uint64_t shared_off;        /* within the store: the shared counters */
    uint64_t blocks_used_off;   /* ... the uint32_t count of blocks claimed */
    uint64_t blocks_off;        /* ... the first block */
    uint64_t block_stride;
    uint64_t naux_off;          /* ... the uint32_t count of aux keys named */
    uint64_t aux_off;           /* ... the aux counters */
    uint32_t aux_max;
    uint32_t store_live;        /* 1: the store is the process's counters (live);
                                 * 0: it is not kept (a process already
                                 * multi-threaded at its first socket: a switch
                                 * then could lose counts): every counter is in
                                 * the report text, written on request */
    /* the report text: a reader adds 1 to want; the process, at its next
     * call into the library, writes the text and sets done = want */
    uint32_t want;
    uint32_t done;
    uint32_t text_seq;          /* odd while being written */
    uint32_t text_len;
    uint64_t text_ns;           /* CLOCK_REALTIME of the text */
    /* set by a reader with its want: also write <dir>/<pid>.conns, every
     * socket the library tracks, one line each (zcsock stat --conns) */
    uint32_t conns_req;
    uint32_t pad2;
} zc_live_hdr_t;

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/* 1 when path is a real directory (not a link) of this user, closed to
 * everyone else. */
static inline int zc_live_dir_ok(const char *path)
{
    struct stat st;

    return !lstat(path, &st) && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
           !(st.st_mode & 077);
}

/* /dev/shm as most systems have it: a directory, sticky and writable by
 * all, of at least 1 GiB (a container's is often 64 MiB, which 170 files of
 * 376 KiB fill: there /tmp serves).  By its size, not what is free, so that
 * every process of a mount namespace picks the same directory (mailboxes
 * are found there by pid). */
#define ZC_LIVE_SHM_MIN (1ull << 30)
static inline int zc_live_shm_ok(void)
{
    struct statfs fs;
    struct stat st;

    return !lstat("/dev/shm", &st) && S_ISDIR(st.st_mode) && (st.st_mode & 01777) == 01777 &&
           !statfs("/dev/shm", &fs) &&
           (unsigned long long)fs.f_blocks * (unsigned long long)fs.f_frsize >= ZC_LIVE_SHM_MIN;
}

/* The directory (see above) into buf; 0, or -errno (-EPERM: it exists but
 * is not safely ours).  make: create it when missing. */
static inline int zc_live_dir(char *buf, unsigned size, int make)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    char base[256];
    int n;

    if (x && *x == '/' && zc_live_dir_ok(x))
        snprintf(base, sizeof(base), "%s", x);
    else if (snprintf(base, sizeof(base), "/run/user/%u", (unsigned)geteuid()) > 0 &&
             zc_live_dir_ok(base))
        ;
    else
        base[0] = 0;
    n = base[0] ? snprintf(buf, size, "%s/zcsock", base)
                : snprintf(buf, size, "%s/zcsock-%u", zc_live_shm_ok() ? "/dev/shm" : "/tmp",
                           (unsigned)geteuid());
    if (n <= 0 || (unsigned)n >= size)
        return -ENAMETOOLONG;
    if (make && mkdir(buf, 0700) && errno != EEXIST)
        return -errno;
    if (zc_live_dir_ok(buf))
        return 0;
    return access(buf, F_OK) ? -ENOENT : -EPERM;
}

/* The entries of dir named <pid> or .<pid> (then anything) whose process
 * is gone: fn(arg, the directory's descriptor, the name, what follows the
 * digits), one read of the directory, at most 64 such names looked at.
 * For sweeping what killed processes left (common/zc_live.c, the local
 * path's mailboxes). */
typedef void (*zc_dir_gone_fn)(void *arg, int dirfd, const char *name, const char *rest);
void zc_dir_gone_pids(const char *dir, zc_dir_gone_fn fn, void *arg);

/* The same with the names' pids read by decode(darg, name, &rest): the pid
 * (0: not a name of a process), rest pointing past what named it. */
typedef long (*zc_dir_pid_fn)(void *darg, const char *name, const char **rest);

/* zc_dir_gone_pids' decoder: <pid> or .<pid>, then anything (*rest); 0
 * when the name starts with neither. */
long zc_dir_decimal(void *arg, const char *name, const char **rest);
void zc_dir_gone(const char *dir, zc_dir_pid_fn decode, void *darg, zc_dir_gone_fn fn,
                 void *arg);

/* The library's side (common/zc_live.c). */
extern zc_live_hdr_t *zc_live;          /* NULL until published */

/* Publish this process's counters (idempotent; at its first socket; a fork
 * child of a published parent: see zc_live_publish_later). */
void zc_live_publish(void);

/* A fork child of a published parent publishes its own file only when it
 * makes or accepts a socket (shim_fd_socket_track) or pairs a connection
 * (zc_live_waiting, the local path): making the file costs 250-350 us here
 * (most of it reserving its blocks), which a forking server paid for every
 * child, however short its life (pgbench -C against PostgreSQL: a backend
 * a connection), and a child that execs at once never needs one.  Not
 * later by a clock: a child that put itself under a seccomp filter the
 * library cannot see (a raw system call) would be killed by the file's
 * system calls; a socket or a pairing makes system calls of its own. */
void zc_live_publish_later(void);
extern int zc_live_waiting;             /* a fork child waits to publish */

/* Make the file, not yet listed, with the counters mapped from it, while
 * the process has one thread (before its first pthread_create): a process
 * that later publishes has live counters even when it then runs threads.
 * Nothing when already made or published, or with more than one thread. */
void zc_live_stage(void);

/* The process leaves (exit: the file goes) or is replaced (exec: the file
 * goes; zc_live_exec_failed publishes again). */
void zc_live_exit(void);
void zc_live_exec_failed(void);

/* fork child, before its counters are zeroed: the parent's file is not
 * its own.  1 when the parent had published or was waiting to (the child
 * then publishes its own later, zc_live_publish_later). */
int zc_live_fork_child(void);

/* What the report adds to the shim's counters (the modules'), or NULL. */
extern size_t (*zc_live_extra)(char *buf, size_t size);

/* Writes the connection lines into a descriptor (shim_fd_describe_all), or
 * NULL. */
extern void (*zc_live_conns_fn)(int out);

/* Write all of buf to fd (raw system calls); 0 or -1. */
int zc_live_write_fd(int fd, const char *buf, size_t n);

/* The process put itself under a seccomp filter (or started under one): a
 * system call the filter refuses could kill it (sshd's sandboxed children
 * die of SIGSYS), so from now on the live code makes none: nothing more is
 * published or answered, and the file is left for the next process to
 * publish or zcsock stat to remove.  Hook-safe. */
void zc_live_seal(void);

/* How the library asks, at publication, whether a seccomp filter is on
 * (>0: yes); NULL: it does not. */
extern int (*zc_live_seccomp_mode)(void);

/* A reader asked for the report text: write it. */
void zc_live_answer(void);

static inline void zc_live_poll(void)
{
    zc_live_hdr_t *h = zc_live;

    if (__builtin_expect(h != 0, 0) &&
        __atomic_load_n(&h->want, __ATOMIC_RELAXED) != __atomic_load_n(&h->done, __ATOMIC_RELAXED))
        zc_live_answer();
}

#endif
