/* The local path across SCM_RIGHTS: a paired socket passed to another
 * process keeps its channel.
 *
 * Every process that makes an AF_UNIX socket binds a mailbox, a SOCK_SEQPACKET
 * listener at <private directory>/mbox/k<8 hex>: the directory of the live
 * statistics (zc_live_dir: 0700, this user's, refused when anyone else made
 * it), so another user can neither reach nor take the name, and the file
 * is named by the pid hidden under the user's key (lp_mbox_file,
 * zc_key_hide), so that /proc/net/unix, which shows every user the path,
 * does not tell which processes use the library.  Where that
 * directory cannot be had, the name is the abstract "\0zcsock/v1/M/<pid>",
 * anyone's to connect to or bind first (said once).  A sender
 * whose SCM_RIGHTS message carries paired sockets first posts, for each, one
 * record {magic, socket cookie, connection state} plus the channel memfd to
 * the mailbox of the process at the other end of its AF_UNIX socket
 * (SO_PEERCRED), counting that process as a holder; then the real sendmsg
 * runs.  A receiver that gets a stream socket through SCM_RIGHTS looks in its
 * mailbox for the record with that socket's cookie and adopts the channel.
 * The record is posted before the descriptor leaves, so it is always there
 * first.  A receiver without zcsock has no mailbox: the sender finds that
 * out and hands the connection back to the kernel (path_local_hand_back)
 * before the descriptor leaves.
 *
 * Hook-safe: no allocation, no stdio; socket calls through zc_real. */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "lp_int.h"
#include "scm.h"
#include "adopt.h"
#include "handback.h"
#include "pairing.h"
#include "zc_key.h"
#include "zc_live.h"

#define LP_MBOX_MAGIC 0x31786f624d637a5aULL   /* "ZczMbox1" */
#define LP_LINGER_MAGIC 0x31676e694c637a5aULL /* "ZczLing1" */
#define LP_MBOX_PENDING 64     /* records kept for sockets not received yet */
#define LP_LINGER_KEPT 16
#define LP_MBOX_DRAIN_MS 100   /* the most one look into the mailbox reads for */
#define LP_MBOX_HELD 160       /* connections taken from the queues (two listeners'
                                * backlogs of 64, and more) not read to their end yet */
#define LP_MBOX_MSGS 1024      /* messages read from one mailbox connection, at most
                                * (its sender's buffer holds about 300) */
#define LP_QUARANTINE 32       /* foreign files whose close could block, kept */
#define LP_MBOX_SWEEP_EVERY 16   /* fork children: one in this many sweeps */
#define LP_MBOX_EXPIRE_MS 10000 /* a record whose socket has not come by then is
                                 * handed back (its send failed, or never came) */

/* A record kept for a socket not received yet: the channel memfd and the
 * poster's copy of the very socket (held so that a record dropped from the
 * table can still hand its connection back to the kernel). */
/* A mailbox connection taken from its listener and not read to its end. */
typedef struct lp_mbox_held {
    int fd;
    int pid;            /* the poster (SO_PEERCRED) */
    uint8_t mine;       /* of our user */
    uint8_t shut;       /* shut for reading: it may send nothing more */
    uint8_t read;       /* its first message was read */
    uint8_t kept;       /* raised among the library's descriptors */
} lp_mbox_held_t;

typedef struct lp_mbox_rec {
    path_local_handover_t h;
    int memfd;
    int sock;           /* internal (shim_fd_internal_keep) */
    int poster;         /* its pid */
    int64_t t0;         /* when it was kept (ms) */
} lp_mbox_rec_t;

static struct {
    int fd;             /* our mailbox listener, -1 */
    int parent_fd;      /* the parent's, kept after fork: a socketpair made
                         * before the fork names the parent as its peer, so
                         * records for us may arrive there */
    int pid;            /* the process that bound it */
    int lock;
    int npending;       /* oldest first */
    lp_mbox_rec_t pending[LP_MBOX_PENDING];
    int nevicted;       /* dropped from pending: handed back after the look */
    lp_mbox_rec_t evicted[LP_MBOX_PENDING];
    int nheld;          /* oldest first */
    lp_mbox_held_t held[LP_MBOX_HELD];
    int nquarantine;    /* lp_fd_drop_foreign */
    int quarantine[LP_QUARANTINE];
    /* Lingering sockets (LINGER in handback.c): a closed peer's socket, by
     * the inode of the channel it served; the oldest goes when full. */
    int scm;            /* bound for SCM_RIGHTS (an AF_UNIX socket), not only
                         * for lingering sockets: kept while the process lives */
    int nlinger;
    uint64_t linger_ino[LP_LINGER_KEPT];
    int linger_sock[LP_LINGER_KEPT];
    int squat_told;     /* the notice that our name is taken was given */
    int public_told;    /* the notice that our name is the public one */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];  /* our private name, or "" */
    int forked;         /* a child may read our mailbox still: its name stays at exit */
} mbox = { .fd = -1, .parent_fd = -1 };

typedef struct lp_mbox_want lp_mbox_want_t;
static void lp_mbox_look(lp_mbox_want_t *w);
static void lp_recs_close(void);

typedef struct lp_mbox_msg {
    uint64_t magic;
    path_local_handover_t h;
} lp_mbox_msg_t;

/* pid's mailbox at its abstract name (the fallback: public). */
static socklen_t lp_mbox_addr(int pid, struct sockaddr_un *a)
{
    int n;

    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    n = (int)zc_fmt(a->sun_path + 1, sizeof(a->sun_path) - 1, "zcsock/v1/M/%d", pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* The name of pid's mailbox file: "k" and its pid hidden under the user's
 * key (8 hex digits, zc_key_hide: the paths /proc/net/unix shows every user
 * do not tell which processes use the library), or the pid itself where
 * there is no key.  Its length. */
static size_t lp_mbox_file(char *buf, size_t size, int pid)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t k[ZC_KEY_LEN];
    uint32_t v;

    if (size < 10 || !zc_key_get(k))
        return zc_fmt(buf, size, "%d", pid);
    v = zc_key_hide(k, (uint32_t)pid);
    memset(k, 0, sizeof(k));
    buf[0] = 'k';
    for (int i = 0; i < 8; i++)
        buf[1 + i] = hex[(v >> (28 - 4 * i)) & 0xf];
    buf[9] = 0;
    return 9;
}

/* The pid a mailbox file stands for (lp_mbox_file's names; decimal ones
 * too): for the sweep, zc_dir_gone. */
static long lp_mbox_pid(void *arg, const char *name, const char **rest)
{
    uint8_t k[ZC_KEY_LEN];
    uint32_t v = 0;
    long pid;

    if (name[0] != 'k')
        return name[0] == '.' ? 0 : zc_dir_decimal(arg, name, rest);
    for (*rest = name + 1; *rest < name + 9; (*rest)++) {
        char c = **rest;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

        if (d < 0)
            return 0;
        v = v << 4 | (uint32_t)d;
    }
    if (!zc_key_get(k))
        return 0;
    pid = zc_key_show(k, v);
    memset(k, 0, sizeof(k));
    return pid > 0 && pid <= 4194304 ? pid : 0;
}

/* pid's mailbox in this user's private directory: <dir>/mbox/<name>
 * (lp_mbox_file); 0 when there is none to be had (make: create the
 * directories when missing). */
static socklen_t lp_mbox_path(int pid, struct sockaddr_un *a, int make)
{
    char dir[sizeof(a->sun_path)], file[16];
    size_t n;

    if (zc_live_dir(dir, sizeof(dir), make))
        return 0;
    n = strlen(dir);
    if (n + sizeof("/mbox/k01234567") > sizeof(dir))
        return 0;
    memcpy(dir + n, "/mbox", sizeof("/mbox"));
    if (make && mkdir(dir, 0700) && errno != EEXIST)
        return 0;
    if (!zc_live_dir_ok(dir))
        return 0;
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    lp_mbox_file(file, sizeof(file), pid);
    n = zc_fmt(a->sun_path, sizeof(a->sun_path), "%s/%s", dir, file);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

/* Connect s (SOCK_SEQPACKET, non-blocking) to pid's mailbox: the private
 * name, then the abstract one (the receiver's fallback).  0, or -errno. */
static int lp_mbox_connect(int s, int pid)
{
    struct sockaddr_un a;
    socklen_t len = lp_mbox_path(pid, &a, 0);
    int rc = -ENOENT;

    if (len && zc_real.connect(s, (struct sockaddr *)&a, len) == 0)
        return 0;
    if (len)
        rc = -errno;
    if (rc != -ENOENT && rc != -ECONNREFUSED)
        return rc;
    len = lp_mbox_addr(pid, &a);
    return zc_real.connect(s, (struct sockaddr *)&a, len) == 0 ? 0 : -errno;
}

/* Is the mailbox file at a free to take: no one listens there, or (pid >
 * 0) only an earlier image of this very pid (exec), or a child of it
 * holding that image's listener?  Anything else there is a same-user
 * squatter (or, for a sweep, pid 0, a child still reading it). */
static int lp_mbox_stale(const struct sockaddr_un *a, socklen_t len, int pid)
{
    int s = zc_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), free = 0;
    struct ucred cred;
    socklen_t cl = sizeof(cred);

    if (s < 0)
        return 0;
    if (zc_real.connect(s, (const struct sockaddr *)a, len) < 0)
        free = errno == ECONNREFUSED;
    else
        free = pid > 0 && !zc_real.getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) &&
               cred.pid == pid && cred.uid == geteuid();
    zc_real.close(s);
    return free;
}

/* Mailbox files of processes that are gone (killed, or exec'd a program
 * without the library), unless a child of theirs still listens there: when
 * a process binds its own (zc_dir_gone_pids). */
static void lp_mbox_gone(void *dir, int dirfd, const char *name, const char *rest)
{
    struct sockaddr_un a;

    if (name[0] == '.' || *rest)
        return;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    zc_fmt(a.sun_path, sizeof(a.sun_path), "%s/%s", (const char *)dir, name);
    if (lp_mbox_stale(&a, (socklen_t)sizeof(a), 0))     /* no one listens */
        unlinkat(dirfd, name, 0);
}

static void lp_mbox_sweep(const struct sockaddr_un *mine)
{
    char dir[sizeof(mine->sun_path)];
    char *slash;

    memcpy(dir, mine->sun_path, sizeof(dir));
    slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0;
    zc_dir_gone(dir, lp_mbox_pid, NULL, lp_mbox_gone, dir);
}

/* pid's mailbox beside the one named was (its parent's): in the directory
 * the parent made and checked (our user's, 0700: no one else can have
 * replaced it since), without looking for it again (11 system calls a
 * fork child).  0 when was names none. */
static socklen_t lp_mbox_beside(const char *was, int pid, struct sockaddr_un *a)
{
    const char *slash = was ? strrchr(was, '/') : NULL;
    char file[16];
    size_t n;

    if (!slash || (size_t)(slash - was) + sizeof("/k01234567") > sizeof(a->sun_path))
        return 0;
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    n = (size_t)(slash - was);
    memcpy(a->sun_path, was, n);
    lp_mbox_file(file, sizeof(file), pid);
    n += zc_fmt(a->sun_path + n, sizeof(a->sun_path) - n, "/%s", file);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

/* Bind and listen on pid's mailbox: the private name (beside was, the
 * parent's, when given; a stale file there is taken over; sweep: the names
 * of processes gone go too), else the abstract one.  The listener, or -1
 * (*squat: the name is someone else's). */
static int lp_mbox_bind(int pid, const char *was, int sweep, int *squat, char *name,
                        size_t namesz)
{
    struct sockaddr_un a;
    socklen_t len = lp_mbox_beside(was, pid, &a);
    int s = zc_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), rc = -1;

    *squat = 0;
    if (s < 0)
        return -1;
    if (len && (rc = zc_real.bind(s, (struct sockaddr *)&a, len)) < 0 && errno != EADDRINUSE)
        len = 0;                /* (the directory gone, ...): the whole way */
    if (!len && (len = lp_mbox_path(pid, &a, 1)))
        rc = zc_real.bind(s, (struct sockaddr *)&a, len);
    if (len) {
        zc_fmt(name, namesz, "%s", a.sun_path);
        if (rc < 0 && errno == EADDRINUSE && lp_mbox_stale(&a, len, pid) && !unlink(a.sun_path))
            rc = zc_real.bind(s, (struct sockaddr *)&a, len);
        if (rc == 0 && zc_real.listen(s, 64) == 0) {
            zc_fmt(mbox.path, sizeof(mbox.path), "%s", a.sun_path);
            if (sweep)
                lp_mbox_sweep(&a);
            return s;
        }
        if (rc == 0 || errno == EADDRINUSE) {
            /* taken by a same-user process (the directory is ours) */
            *squat = rc < 0;
            zc_real.close(s);
            return -1;
        }
        /* (a full file system, ...): the public name then */
    }
    if (!mbox.public_told) {
        mbox.public_told = 1;
        zc_log(ZC_LOG_NOTICE, "local path: this process's mailbox cannot be in a private "
               "directory (see zcsock stat): its name is the public \\0zcsock/v1/M/%d, which other "
               "users can reach", pid);
    }
    len = lp_mbox_addr(pid, &a);
    zc_fmt(name, namesz, "\\0zcsock/v1/M/%d", pid);
    if (zc_real.bind(s, (struct sockaddr *)&a, len) == 0 && zc_real.listen(s, 64) == 0)
        return s;
    *squat = errno == EADDRINUSE;
    zc_real.close(s);
    return -1;
}

/* Held for a look into the mailbox (up to about LP_MBOX_DRAIN_MS when an
 * outsider filled it): a waiter spins briefly, then yields its CPU. */
/* The connections held, closed unread: a fork child's copies of its
 * parent's (the parent reads them; the child's close is not the last). */
static void lp_held_close(void)
{
    while (mbox.nheld) {
        lp_mbox_held_t *c = &mbox.held[--mbox.nheld];

        if (c->kept)
            shim_fd_internal_drop(c->fd);
        else
            zc_real.close(c->fd);
    }
}

static void lp_mbox_lock(void)
{
    int n = 0;

    while (__atomic_exchange_n(&mbox.lock, 1, __ATOMIC_ACQUIRE)) {
        if (++n < 128)
            __builtin_ia32_pause();
        else
            sched_yield();
    }
}

static void lp_mbox_unlock(void)
{
    __atomic_store_n(&mbox.lock, 0, __ATOMIC_RELEASE);
}

void path_local_mbox_ensure(void)
{
    char name[sizeof(((struct sockaddr_un *)0)->sun_path) + 8], was[sizeof(mbox.path)];
    int pid = zc_getpid(), s, squat, saved = errno;

    if (!path_local_enabled() || __atomic_load_n(&mbox.pid, __ATOMIC_ACQUIRE) == pid)
        return;
    lp_mbox_lock();
    if (mbox.pid != pid) {
        if (mbox.parent_fd >= 0)        /* the grandparent's: one level is enough */
            shim_fd_internal_drop(mbox.parent_fd);
        zc_fmt(was, sizeof(was), "%s", mbox.fd >= 0 ? mbox.path : "");
        mbox.parent_fd = mbox.fd;       /* the parent's, inherited across fork */
        mbox.fd = -1;
        mbox.path[0] = 0;
        mbox.forked = 0;
        lp_recs_close();                /* the parent's records (our copies) */
        lp_held_close();                /* and the connections it held */
        /* A forking server's children bound one each, and each swept the
         * whole directory (a kill, and for the last child gone a socket,
         * a connect and an unlink): now they leave their names at exit
         * (path_local_mbox_exit), and one child in LP_MBOX_SWEEP_EVERY
         * sweeps what killed ones left. */
        s = lp_mbox_bind(pid, was[0] ? was : NULL,
                         mbox.parent_fd < 0 || pid % LP_MBOX_SWEEP_EVERY == 0, &squat, name,
                         sizeof(name));
        if (squat && !mbox.squat_told) {
            mbox.squat_told = 1;
            zc_log(ZC_LOG_NOTICE, "local path: another process holds this process's "
                   "mailbox name (%s): its connections are not paired "
                   "(local.declined.mailbox)", name);
        }
        if (s >= 0)
            mbox.fd = shim_fd_internal_keep(s, &path_local, &mbox);
        __atomic_store_n(&mbox.pid, pid, __ATOMIC_RELEASE);
    }
    lp_mbox_unlock();
    errno = saved;
}

/* Can this process pair: does it hold its mailbox (binding it now)?  A
 * peer that closes with bytes of its unread leaves its socket there, and
 * hand-overs come through it: without it those bytes would be lost at a
 * hand-back, so a name another process took is a reason not to pair
 * (local.declined.mailbox), said once, never a silent absence. */
int path_local_mbox_usable(void)
{
    path_local_mbox_ensure();
    return __atomic_load_n(&mbox.pid, __ATOMIC_ACQUIRE) == zc_getpid() && mbox.fd >= 0;
}

/* A mailbox for SCM_RIGHTS hand-overs (the process made an AF_UNIX socket). */
void path_local_mbox_ensure_scm(void)
{
    __atomic_store_n(&mbox.scm, 1, __ATOMIC_RELAXED);
    path_local_mbox_ensure();
}

/* The process's last connection went (lp_conn_free): what belonged to the
 * connections goes (lingering sockets, the parent's mailbox inherited
 * across fork, records never claimed); the mailbox itself stays for the
 * process's life, one descriptor above the floor: binding it again for
 * every connection of a process that opens them one after the other cost
 * five system calls each (issue 31). */
void path_local_mbox_idle(void)
{
    int i;

    if (__atomic_load_n(&mbox.scm, __ATOMIC_RELAXED))
        return;
    /* nothing to let go (a hint: what comes meanwhile goes at the next
     * idle): no system call at the end of every short connection */
    if (!__atomic_load_n(&mbox.nlinger, __ATOMIC_RELAXED) &&
        __atomic_load_n(&mbox.parent_fd, __ATOMIC_RELAXED) < 0 &&
        !__atomic_load_n(&mbox.npending, __ATOMIC_RELAXED) &&
        !__atomic_load_n(&mbox.nevicted, __ATOMIC_RELAXED))
        return;
    if (mbox.pid != zc_getpid())
        return;
    lp_mbox_lock();
    if (!mbox.scm && mbox.pid == zc_getpid()) {
        for (i = 0; i < mbox.nlinger; i++)
            shim_fd_internal_drop(mbox.linger_sock[i]);
        mbox.nlinger = 0;
        if (mbox.parent_fd >= 0)
            shim_fd_internal_drop(mbox.parent_fd);
        mbox.parent_fd = -1;
        lp_recs_close();            /* (records come only to a scm mailbox) */
    }
    lp_mbox_unlock();
}

/* The process leaves (exit, its destructors running): its mailbox's name
 * goes with it, unless a child it forked may read the mailbox still (a
 * socketpair made before the fork names this process, and records for the
 * child come here), or the path is off for the process: under a seccomp
 * filter an unlink kills it (sshd's sandboxed preauth child, SIGSYS), and
 * the name is left to a sweep. */
ZC_FORK_CODE void path_local_mbox_exit(void)
{
    if (path_local_enabled() && mbox.path[0] && !mbox.forked && mbox.fd >= 0 &&
        __atomic_load_n(&mbox.pid, __ATOMIC_ACQUIRE) == zc_getpid())
        unlink(mbox.path);
}

/* fork parent: the child holds our mailbox too. */
void path_local_mbox_fork_parent(void)
{
    if (mbox.fd >= 0 && !mbox.forked)
        mbox.forked = 1;
}

/* fork child: its own mailbox (its pid names it) if the parent had one. */
ZC_FORK_CODE void path_local_mbox_fork_child(void)
{
    if (mbox.lock)      /* (FORK PAGES, zc_real.h: no write that changes nothing) */
        mbox.lock = 0;
    if (mbox.fd >= 0)
        path_local_mbox_ensure();
}

/* Our descriptor moved (lp_internal_moved): 1 when it was a mailbox. */
int path_local_mbox_moved(void *ctx, int from, int to)
{
    int i;

    if (ctx != &mbox)
        return 0;
    if (from == mbox.fd)
        mbox.fd = to;
    else if (from == mbox.parent_fd)
        mbox.parent_fd = to;
    for (i = 0; i < mbox.nlinger; i++)
        if (mbox.linger_sock[i] == from)
            mbox.linger_sock[i] = to;
    for (i = 0; i < mbox.nquarantine; i++)
        if (mbox.quarantine[i] == from)
            mbox.quarantine[i] = to;
    for (i = 0; i < mbox.nheld; i++)
        if (mbox.held[i].kept && mbox.held[i].fd == from)
            mbox.held[i].fd = to;
    for (i = 0; i < mbox.npending; i++)
        if (mbox.pending[i].sock == from)
            mbox.pending[i].sock = to;
    for (i = 0; i < mbox.nevicted; i++)
        if (mbox.evicted[i].sock == from)
            mbox.evicted[i].sock = to;
    return 1;
}

/* Post one hand-over to process pid's mailbox: the channel memfd and, as
 * proof that the poster holds the connection, its socket sock (the
 * receiver compares its cookie).  The mailbox must be pid's own and of our
 * user (SO_PEERCRED of the listener we reached): an abstract name is
 * anyone's to bind first (DESIGN.md §3.9), and a squatter gets nothing.
 * 0, or -errno (-ECONNREFUSED / -ENOENT: that process has no mailbox;
 * -EPERM: the name is someone else's). */
static int lp_mbox_post_once(int pid, uint64_t magic, const path_local_handover_t *h,
                             int memfd, int sock)
{
    socklen_t cl = sizeof(struct ucred);
    lp_mbox_msg_t m = { magic, *h };
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } u;
    struct iovec iov = { &m, sizeof(m) };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                          .msg_controllen = sizeof(u.buf) };
    int s = zc_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), rc = 0;
    int fds[2] = { memfd, sock };
    struct ucred cred;

    if (s < 0)
        return -errno;
    memset(&u, 0, sizeof(u));
    u.h.cmsg_level = SOL_SOCKET;
    u.h.cmsg_type = SCM_RIGHTS;
    u.h.cmsg_len = CMSG_LEN(2 * sizeof(int));
    memcpy(CMSG_DATA(&u.h), fds, sizeof(fds));
    rc = lp_mbox_connect(s, pid);
    if (rc == 0 && (zc_real.getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) ||
                    cred.uid != geteuid() || cred.pid != pid))
        rc = -EPERM;
    if (rc == 0 && zc_real.sendmsg(s, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(m))
        rc = -errno;
    zc_real.close(s);
    if (rc == -EPERM)
        zc_stat_add(ZC_STAT_LOCAL_DECLINED, 1);
    return rc;
}

/* lp_mbox_post_once, again when the receiver took our connection between
 * its connect and the send (it reads what a connection holds and shuts it:
 * our send then fails with EPIPE, and a new connection is read next time). */
static int lp_mbox_post(int pid, uint64_t magic, const path_local_handover_t *h, int memfd,
                        int sock)
{
    int rc, tries = 0;

    while ((rc = lp_mbox_post_once(pid, magic, h, memfd, sock)) == -EPIPE && ++tries < 4)
        ;
    return rc;
}

#define LP_SCM_ACCEPT_MS 100

/* Post a hand-over to pid's mailbox.  A process that just accepted the
 * connection we pass on binds its mailbox in that very accept (the hook's
 * work after the kernel's): an absent one is tried again for at most
 * LP_SCM_ACCEPT_MS. */
static int lp_mbox_post_wait(int pid, const path_local_handover_t *h, int memfd, int sock)
{
    int64_t t0 = lp_now_ms();
    int rc;

    while ((rc = lp_mbox_post(pid, LP_MBOX_MAGIC, h, memfd, sock)) == -ECONNREFUSED ||
           rc == -ENOENT) {
        if (lp_now_ms() - t0 >= LP_SCM_ACCEPT_MS || kill(pid, 0))
            break;
        zc_real.poll(NULL, 0, 1);
    }
    return rc;
}

/* The process that receives what we send on AF_UNIX socket fd, -1 when it
 * cannot be told.  SO_PEERCRED names the creator of the other end: for a
 * socketpair that is us even when that end went to a child; for a socket
 * accepted from a listener, the process that made the listener, which
 * need not be the one that accepted (Dovecot's master makes the imap
 * service's listener, and the imap processes it starts accept on it;
 * uvicorn's workers inherit theirs across exec).  So the process named
 * must hold the other end, or one of its children, which is then the
 * receiver (a forked child of ours reads our mailbox too, an exec'd one
 * only its own, if it runs zcsock at all). */
static int lp_scm_receiver(int fd)
{
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    int64_t t0 = lp_now_ms();
    int me = zc_getpid();

    if (zc_real.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.pid <= 0)
        return -1;
    /* A connection to a listener may not be accepted yet (we connected and
     * send at once, as Dovecot's imap-login does): its other end is in the
     * listener's queue, no socket of any process's yet (its inode reads 0);
     * the accepting process takes it within moments.  Looked for again for
     * at most LP_SCM_ACCEPT_MS, then the connection is handed back. */
    for (;;) {
        uint64_t ino;
        int kids[64], n, i;

        if (local_pair_unix_peer_ino(fd, &ino))
            return -1;
        if (ino && shim_proc_holds_socket(cred.pid == me ? 0 : (int)cred.pid, ino))
            return (int)cred.pid;
        n = ino ? shim_proc_children_of(cred.pid == me ? 0 : (int)cred.pid, kids, 64) : 0;
        for (i = 0; i < n; i++) {
            struct stat st;
            int mfd = __atomic_load_n(&mbox.fd, __ATOMIC_ACQUIRE);

            if (!shim_proc_holds_socket(kids[i], ino))
                continue;
            /* A forked child of ours that has not exec'd still holds our
             * mailbox (close-on-exec) and reads it; it may not have bound
             * its own yet. */
            if (cred.pid == me && mfd >= 0 && !fstat(mfd, &st) &&
                shim_proc_holds_socket(kids[i], (uint64_t)st.st_ino))
                return me;
            return kids[i];
        }
        if (lp_now_ms() - t0 >= LP_SCM_ACCEPT_MS)
            return -1;
        zc_real.poll(NULL, 0, 1);
    }
}

void path_local_scm_send(int fd, const struct msghdr *msg)
{
    struct cmsghdr *cm;
    int saved = errno, peer = -2;

    lp_shared_again();
    for (cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm; cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
        const int *fds = (const int *)CMSG_DATA(cm);
        size_t i, n;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < n; i++) {
            path_local_handover_t h;
            int memfd, rc;

            if (lp_claimed(shim_fd_get(fds[i])))
                lp_offer_cancel(lp_conn(shim_fd_get(fds[i])), "SCM_RIGHTS");  /* it leaves unoffered */
            if (!lp_claimed(shim_fd_get(fds[i])) ||
                path_local_handover_prepare(shim_fd_get(fds[i]), fds[i], &h, &memfd))
                continue;
            if (peer == -2)
                peer = lp_scm_receiver(fd);
            rc = peer > 0 ? lp_mbox_post_wait(peer, &h, memfd, fds[i]) : -ENOTCONN;
            if (rc == 0) {
                path_local_handover_posted(shim_fd_get(fds[i]));
                zc_stat_add(ZC_STAT_LOCAL_HANDED_OVER, 1);
            } else {
                /* The receiver reads the kernel socket itself (no mailbox:
                 * not a zcsock process we can reach): hand the connection
                 * back to the kernel before the descriptor leaves. */
                path_local_hand_back(shim_fd_get(fds[i]), fds[i], "SCM_RIGHTS to a process "
                                     "without a zcsock mailbox");
            }
        }
    }
    errno = saved;
}

/* --- the receiving side --------------------------------------------------------
 *
 * A mailbox name is public: another user or a same-user process that is not
 * the peer may connect to it, flood it, post records that are never claimed,
 * or pass descriptors whose close blocks (a TCP socket with a long SO_LINGER
 * and unsent bytes, a FUSE file).  So each look into the mailbox:
 *  - finds what it looks for first, whatever waits before it: one peek
 *    (MSG_PEEK, no descriptor received) at the first message of each
 *    connection held or waiting picks the one that carries the record of
 *    the socket being received (or a lingering socket: lp_linger_take),
 *    which is read first.  The record is posted before its descriptor
 *    leaves, so it waits in a queue of at most 65 when the descriptor
 *    comes: an outsider's connections that hold thousands of descriptors
 *    in flight no longer stand before it (they did, and a receive that
 *    gave up after 1 s read the socket as a plain one, its ring bytes
 *    stranded);
 *  - then reads the connections in order, every message of each, for at
 *    most LP_MBOX_DRAIN_MS; what is not read to its end by then is held
 *    (LP_MBOX_HELD, raised among the library's descriptors) for the next
 *    look, never closed unread;
 *  - knows who posted before reading (SO_PEERCRED of the connection); shuts
 *    the connection for reading once its first message is read, so it can
 *    send nothing more, and reads all it had in flight: nothing foreign is
 *    left to be released behind our back when it closes;
 *  - takes a record only from our user, with exactly the two descriptors it
 *    names (the channel memfd and the poster's copy of the very socket);
 *    every other descriptor is dropped by lp_fd_drop_foreign, which never
 *    blocks;
 *  - takes the record for the socket being received at once; the others wait
 *    in a table of LP_MBOX_PENDING, where a full table loses the oldest
 *    record of the poster that has the most (a flood evicts its own). */

/* A file system whose close (its flush) may wait for a server another
 * process runs: FUSE and the network file systems. */
static int lp_fs_close_may_wait(unsigned long magic)
{
    static const unsigned long waits[] = {
        0x65735546UL,   /* FUSE */
        0x6969UL,       /* NFS */
        0xFF534D42UL,   /* CIFS */
        0xFE534D42UL,   /* SMB2 */
        0x517BUL,       /* SMB */
        0x01021997UL,   /* 9P */
        0x00C36400UL,   /* Ceph */
        0x5346414FUL,   /* AFS */
        0x73757245UL,   /* Coda */
        0x01161970UL,   /* GFS2 */
        0x7461636FUL,   /* OCFS2 */
        0x13661366UL,   /* OrangeFS */
    };
    size_t i;

    for (i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
        if ((magic & 0xFFFFFFFFUL) == waits[i])
            return 1;
    return 0;
}

/* Close a descriptor someone else passed us without blocking: a socket is
 * reset (SO_LINGER 0: no wait for unsent bytes); a file on a file system
 * whose close may wait for a server (FUSE, network file systems: the
 * flush) is kept, up to LP_QUARANTINE, never closed by the library.  Lock
 * held. */
static void lp_fd_drop_foreign(int fd)
{
    struct stat st;
    struct statfs sf;

    if (!fstat(fd, &st) && S_ISSOCK(st.st_mode)) {
        struct linger l = { 1, 0 };

        (void)zc_real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    } else if (!fstatfs(fd, &sf) && lp_fs_close_may_wait((unsigned long)sf.f_type) &&
               mbox.nquarantine < LP_QUARANTINE) {
        mbox.quarantine[mbox.nquarantine++] = shim_fd_internal_keep(fd, &path_local, &mbox);
        zc_stat_add(ZC_STAT_LOCAL_MBOX_FOREIGN, 1);
        return;
    }
    zc_real.close(fd);
    zc_stat_add(ZC_STAT_LOCAL_MBOX_FOREIGN, 1);
}

/* The descriptors of one message, in order (all of them: the control
 * buffer holds SCM_MAX_FD, so the kernel drops none unseen). */
static int lp_mbox_fds(struct msghdr *msg, int *fds, int max)
{
    struct cmsghdr *cm;
    int got = 0, k;

    for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
        int nfd;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (k = 0; k < nfd && got < max; k++)
            memcpy(&fds[got++], CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
    }
    return got;
}

/* Keep a lingering socket under its channel's inode (memfd is the poster's
 * proof that it holds the channel; closed here).  Lock held. */
static void lp_linger_keep(int memfd, int sock)
{
    struct stat st;
    int i;

    if (fstat(memfd, &st)) {
        zc_real.close(memfd);
        zc_real.close(sock);
        return;
    }
    zc_real.close(memfd);
    if (mbox.nlinger == LP_LINGER_KEPT) {
        shim_fd_internal_drop(mbox.linger_sock[0]);
        for (i = 1; i < LP_LINGER_KEPT; i++) {
            mbox.linger_ino[i - 1] = mbox.linger_ino[i];
            mbox.linger_sock[i - 1] = mbox.linger_sock[i];
        }
        mbox.nlinger--;
    }
    mbox.linger_ino[mbox.nlinger] = (uint64_t)st.st_ino;
    mbox.linger_sock[mbox.nlinger++] = shim_fd_internal_keep(sock, &path_local, &mbox);
}

/* Close what a record holds (its connection is not ours to hand back). */
static void lp_rec_close(lp_mbox_rec_t *r)
{
    zc_real.close(r->memfd);
    shim_fd_internal_drop(r->sock);
}

/* Every record kept, closed (a fork child's copies of its parent's: the
 * parent hands them back).  Lock held. */
static void lp_recs_close(void)
{
    while (mbox.npending)
        lp_rec_close(&mbox.pending[--mbox.npending]);
    while (mbox.nevicted)
        lp_rec_close(&mbox.evicted[--mbox.nevicted]);
}

/* The index of the oldest record of the poster with the most in recs[0..n). */
static int lp_rec_worst(const lp_mbox_rec_t *recs, int n)
{
    int i, j, worst = 0, most = 0;

    for (i = 0; i < n; i++) {
        int k = 0;

        for (j = 0; j < n; j++)
            k += recs[j].poster == recs[i].poster;
        if (k > most) {
            most = k;
            worst = i;
        }
    }
    return worst;
}

/* Remove record k of recs[0..*n) into *out (NULL: closed).  Lock held. */
static void lp_rec_remove(lp_mbox_rec_t *recs, int *n, int k, lp_mbox_rec_t *out)
{
    if (out)
        *out = recs[k];
    else
        lp_rec_close(&recs[k]);
    memmove(&recs[k], &recs[k + 1], (size_t)(*n - k - 1) * sizeof(recs[0]));
    (*n)--;
}

/* Pending record k leaves the table unclaimed: its connection is handed
 * back to the kernel after the look (lp_mbox_settle), so the socket, when
 * it comes, reads right as a plain one.  A full list of those loses the
 * oldest of the poster with the most (a same-user flooder's own).  Lock
 * held. */
static void lp_pending_evict(int k)
{
    if (mbox.nevicted == LP_MBOX_PENDING) {
        lp_rec_remove(mbox.evicted, &mbox.nevicted, lp_rec_worst(mbox.evicted, mbox.nevicted),
                      NULL);
        zc_stat_add(ZC_STAT_LOCAL_MBOX_LOST, 1);
    }
    lp_rec_remove(mbox.pending, &mbox.npending, k, &mbox.evicted[mbox.nevicted++]);
    zc_stat_add(ZC_STAT_LOCAL_MBOX_EVICTED, 1);
}

/* Keep a record for a socket not received yet (a record for the same
 * socket kept before is replaced: its sender posted again).  A full table
 * evicts the oldest record of the poster with the most.  Lock held. */
static void lp_pending_add(const path_local_handover_t *h, int memfd, int sock, int poster)
{
    int k;

    for (k = 0; k < mbox.npending; k++)
        if (mbox.pending[k].h.cookie == h->cookie) {
            lp_rec_remove(mbox.pending, &mbox.npending, k, NULL);
            break;
        }
    if (mbox.npending == LP_MBOX_PENDING)
        lp_pending_evict(lp_rec_worst(mbox.pending, mbox.npending));
    mbox.pending[mbox.npending++] = (lp_mbox_rec_t){
        *h, memfd, shim_fd_internal_keep(sock, &path_local, &mbox), poster, lp_now_ms() };
}

struct lp_mbox_want {
    uint64_t cookie;            /* the socket being received, 0: none */
    int linger;                 /* lingering sockets (lp_linger_take) */
    int found;
    path_local_handover_t h;
    int memfd;
};

/* One message of a mailbox connection whose poster is of our user or not
 * (mine) and pid: a record (LP_MBOX_MAGIC: the poster proves it holds the
 * socket the record names by passing it, same SO_COOKIE) or a lingering
 * socket (LP_LINGER_MAGIC); anything else, and every descriptor not used,
 * is dropped.  Lock held. */
static void lp_mbox_message(const lp_mbox_msg_t *m, ssize_t n, int flags, int *fds, int nfd,
                            int mine, int poster, lp_mbox_want_t *w)
{
    uint64_t cookie = 0;
    socklen_t kl = sizeof(cookie);
    int i, ok = mine && n == (ssize_t)sizeof(*m) && nfd == 2 &&
                !(flags & (MSG_TRUNC | MSG_CTRUNC));

    if (ok && m->magic == LP_MBOX_MAGIC &&
        zc_real.getsockopt(fds[1], SOL_SOCKET, SO_COOKIE, &cookie, &kl) == 0 &&
        cookie == m->h.cookie && cookie) {
        if (w && !w->found && cookie == w->cookie) {
            zc_real.close(fds[1]);      /* the poster's copy of the socket received */
            w->found = 1;
            w->h = m->h;
            w->memfd = fds[0];
        } else {
            lp_pending_add(&m->h, fds[0], fds[1], poster);
        }
        return;
    }
    if (ok && m->magic == LP_LINGER_MAGIC) {
        lp_linger_keep(fds[0], fds[1]);  /* the caller checks the socket is the peer's */
        return;
    }
    for (i = 0; i < nfd; i++)
        lp_fd_drop_foreign(fds[i]);
    if (n > 0 || nfd)
        zc_stat_add(ZC_STAT_LOCAL_MBOX_REFUSED, 1);
}

/* Read held connection c toward its end, until `until' (ms; one message at
 * least, so the first is always read): 1 when it has no more.  It may send
 * nothing more once shut for reading (its sends fail with EPIPE), so
 * reading until the queue is empty leaves no descriptor of anyone's in
 * flight to be released in our close.  With SO_TIMESTAMP every message
 * read carries a timestamp, even an empty one: a read without one is the
 * end.  Lock held. */
static int lp_mbox_conn(lp_mbox_held_t *c, lp_mbox_want_t *w, int64_t until)
{
    int k;

    for (k = 0; k < LP_MBOX_MSGS; k++) {
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(struct timeval)) + CMSG_SPACE(sizeof(int) * 253)];
        } u;
        lp_mbox_msg_t m;
        struct iovec iov = { &m, sizeof(m) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = sizeof(u.buf) };
        int fds[253], nfd;
        ssize_t n;

        if (k && lp_now_ms() >= until)
            return 0;
        n = zc_real.recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (!c->shut) {
            /* one record per connection: after the first message (or none
             * yet: an outsider's empty connection, or a poster between its
             * connect and its send, which then tries again) the rest is
             * read only to be dropped */
            zc_real.shutdown(c->fd, SHUT_RD);
            c->shut = 1;
            if (n < 0)
                continue;
        }
        if (n < 0 || msg.msg_controllen == 0)
            return 1;                       /* the end (or a kernel without stamps) */
        nfd = lp_mbox_fds(&msg, fds, 253);
        /* the first message read, whenever it came (a poster may send
         * between our first look and the shutdown) */
        lp_mbox_message(&m, n, msg.msg_flags, fds, nfd, c->mine && !c->read, c->pid, w);
        c->read = 1;
    }
    return 1;
}

/* Take connection fd from a listener into the held set (who posted, known
 * before anything is read): its index.  Lock held; a free slot. */
static int lp_mbox_hold(int fd)
{
    lp_mbox_held_t *c = &mbox.held[mbox.nheld];
    struct ucred cred = { 0, 0, 0 };
    socklen_t cl = sizeof(cred);
    int one = 1;

    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->mine = zc_real.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 &&
              cred.uid == geteuid() && cred.pid > 0;
    c->pid = (int)cred.pid;
    (void)zc_real.setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one));
    return mbox.nheld++;
}

/* Read held connection k toward its end (lp_mbox_conn); one read to its
 * end leaves the set.  1 when it did.  Lock held. */
static int lp_mbox_read(int k, lp_mbox_want_t *w, int64_t until)
{
    lp_mbox_held_t c = mbox.held[k];

    if (!lp_mbox_conn(&mbox.held[k], w, until))
        return 0;
    if (c.kept)
        shim_fd_internal_drop(c.fd);
    else
        zc_real.close(c.fd);
    memmove(&mbox.held[k], &mbox.held[k + 1], (size_t)(mbox.nheld - k - 1) * sizeof(c));
    mbox.nheld--;
    return 1;
}

/* Does held connection c carry what w looks for, by one peek at its first
 * message (no descriptor received: the kernel drops its copies of what a
 * peek without room for them would carry, never the last reference)? */
static int lp_mbox_wanted(const lp_mbox_held_t *c, const lp_mbox_want_t *w)
{
    lp_mbox_msg_t m;
    struct iovec iov = { &m, sizeof(m) };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

    if (!c->mine || c->read || zc_real.recvmsg(c->fd, &msg, MSG_PEEK | MSG_DONTWAIT) !=
                                   (ssize_t)sizeof(m))
        return 0;
    return (m.magic == LP_MBOX_MAGIC && w->cookie && m.h.cookie == w->cookie) ||
           (m.magic == LP_LINGER_MAGIC && w->linger);
}

/* A connection from one of our listeners into the held set: its index, -1
 * when none waits (or the set is full). */
static int lp_mbox_accept(void)
{
    int l, fds[2] = { mbox.fd, mbox.parent_fd };

    for (l = 0; l < 2 && mbox.nheld < LP_MBOX_HELD; l++)
        while (fds[l] >= 0) {
            int c = zc_real.accept4(fds[l], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

            if (c >= 0)
                return lp_mbox_hold(c);
            if (errno != EINTR && errno != ECONNABORTED)
                break;
        }
    return -1;
}

/* One look into the mailboxes (ours, and the parent's inherited across
 * fork): first what w looks for (see above), then every connection in
 * order for at most LP_MBOX_DRAIN_MS; records go into w or the pending
 * table.  Lock held. */
static void lp_mbox_look(lp_mbox_want_t *w)
{
    int64_t until = lp_now_ms() + LP_MBOX_DRAIN_MS;
    int k;

    if (w) {
        for (k = 0; k < mbox.nheld && !w->found; k++)
            if (lp_mbox_wanted(&mbox.held[k], w) && lp_mbox_read(k, w, until))
                k--;
        while (!w->found && (k = lp_mbox_accept()) >= 0)
            if (lp_mbox_wanted(&mbox.held[k], w))
                (void)lp_mbox_read(k, w, until);
    }
    for (;;) {
        if (!mbox.nheld && lp_mbox_accept() < 0)
            break;
        if (lp_now_ms() >= until || !lp_mbox_read(0, w, until)) {
            zc_stat_add(ZC_STAT_LOCAL_MBOX_SLOW, 1);
            break;
        }
    }
    /* what stays held stays out of the application's way */
    for (k = 0; k < mbox.nheld; k++)
        if (!mbox.held[k].kept) {
            mbox.held[k].fd = shim_fd_internal_keep(mbox.held[k].fd, &path_local, &mbox);
            mbox.held[k].kept = 1;
        }
}

/* The record for the socket with this cookie, from the pending table or the
 * mailboxes.  1 when found (*h, *memfd: ours now).  Lock held. */
static int lp_mbox_find(uint64_t cookie, path_local_handover_t *h, int *memfd)
{
    lp_mbox_want_t w = { .cookie = cookie, .memfd = -1 };
    int64_t now = lp_now_ms();
    int k;

    for (k = 0; k < mbox.npending; k++)
        if (mbox.pending[k].h.cookie == cookie) {
            lp_mbox_rec_t r;

            lp_rec_remove(mbox.pending, &mbox.npending, k, &r);
            shim_fd_internal_drop(r.sock);
            *h = r.h;
            *memfd = r.memfd;
            return 1;
        }
    for (k = 0; k < mbox.npending; k++)
        if (now - mbox.pending[k].t0 > LP_MBOX_EXPIRE_MS)
            lp_pending_evict(k--);
    lp_mbox_look(&w);
    if (w.found) {
        *h = w.h;
        *memfd = w.memfd;
    }
    return w.found;
}

#define LP_SETTLE_MS 100   /* the most one settling of evicted records takes */

/* Hand back to the kernel the connections of the records evicted (after the
 * look, outside the lock): each is adopted on the poster's copy of its
 * socket, handed back (HAND-BACK, handback.c: the peer is told, the ring's
 * unread bytes go to the kernel) and closed, so that the copy on its way to
 * us reads as the plain socket it now is.  What is left when the time bound
 * passes is dropped, counted as lost. */
static void lp_mbox_settle(void)
{
    int64_t t0 = lp_now_ms();

    for (;;) {
        lp_mbox_rec_t r;
        uint64_t cookie = 0;
        socklen_t kl = sizeof(cookie);
        shim_fd_t *f, was;

        lp_mbox_lock();
        if (!mbox.nevicted || mbox.pid != zc_getpid()) {
            lp_mbox_unlock();
            return;
        }
        lp_rec_remove(mbox.evicted, &mbox.nevicted, 0, &r);
        f = shim_fd_get(r.sock);
        if (f)
            shim_fd_reset(f);           /* ours to adopt, not internal now */
        lp_mbox_unlock();
        if (lp_now_ms() - t0 > LP_SETTLE_MS || !f ||
            zc_real.getsockopt(r.sock, SOL_SOCKET, SO_COOKIE, &cookie, &kl) ||
            cookie != r.h.cookie) {
            zc_real.close(r.memfd);
            zc_real.close(r.sock);
            zc_stat_add(ZC_STAT_LOCAL_MBOX_LOST, 1);
            continue;
        }
        if (path_local_handover_adopt(r.sock, &r.h, r.memfd, 0) == 0 && lp_claimed(f)) {
            lp_revert(lp_conn(f), r.sock, "its hand-over record was evicted");
            zc_stat_add(ZC_STAT_LOCAL_MBOX_HANDED_BACK, 1);
        }
        shim_fd_take(f, &was);
        if (was.path && was.kind == SHIM_FD_SOCKET)
            was.path->ops->forget(&was, r.sock);
        zc_real.close(r.sock);
    }
}

void path_local_scm_received(struct msghdr *msg)
{
    struct cmsghdr *cm;
    int saved = errno;

    if (mbox.fd < 0 || mbox.pid != zc_getpid())
        return;
    for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
        size_t i, n;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < n; i++) {
            path_local_handover_t h;
            struct stat st;
            uint64_t cookie;
            socklen_t l = sizeof(cookie);
            int fd, memfd, found;

            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
                zc_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &l))
                continue;
            lp_mbox_lock();
            found = lp_mbox_find(cookie, &h, &memfd);
            lp_mbox_unlock();
            if (found)
                path_local_handover_adopt(fd, &h, memfd, 1);
        }
    }
    lp_mbox_settle();
    errno = saved;
}

/* --- lingering sockets (LINGER in handback.c) ------------------------------------ */

int lp_linger_post(int pid, int memfd, int sock)
{
    path_local_handover_t h;

    memset(&h, 0, sizeof(h));
    return lp_mbox_post(pid, LP_LINGER_MAGIC, &h, memfd, sock);
}

int lp_linger_take(int memfd)
{
    struct stat st;
    int i, sock = -1;

    if (memfd < 0 || fstat(memfd, &st))
        return -1;
    lp_mbox_lock();
    if (mbox.pid == zc_getpid()) {
        lp_mbox_want_t w = { .linger = 1, .memfd = -1 };

        lp_mbox_look(&w);
    }
    for (i = 0; i < mbox.nlinger; i++)
        if (mbox.linger_ino[i] == (uint64_t)st.st_ino)
            break;
    if (i < mbox.nlinger) {
        sock = mbox.linger_sock[i];
        for (mbox.nlinger--; i < mbox.nlinger; i++) {  /* oldest first, as kept */
            mbox.linger_ino[i] = mbox.linger_ino[i + 1];
            mbox.linger_sock[i] = mbox.linger_sock[i + 1];
        }
        if (shim_fd_get(sock))
            shim_fd_reset(shim_fd_get(sock));   /* the caller's now */
    }
    lp_mbox_unlock();
    lp_mbox_settle();
    return sock;
}

/* PARTS (lp_int.h): a process with a channel has its mailbox; what the
 * connections kept there goes when the last connection object went. */
static void lp_mbox_adopted(lp_conn_t *c)
{
    (void)c;
    path_local_mbox_ensure();
}

const lp_part_t lp_part_mbox = { .adopted = lp_mbox_adopted, .idle = path_local_mbox_idle };
