/* /proc walking for the hooks (shim_proc.h). */
#include "shim_proc.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zc_log.h"
#include "zc_stats.h"
#include "zc_sys.h"

/* A linux_dirent64 as getdents64 returns it. */
typedef struct shim_dirent {
    uint64_t ino;
    int64_t next;
    unsigned short reclen;
    unsigned char type;
    char name[];
} shim_dirent_t;

static long shim_num(const char *s)
{
    long v = 0;

    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (*s - '0');
    return *s ? -1 : v;
}

int shim_proc_each_num(const char *path, int (*fn)(int dirfd, long num, void *arg), void *arg)
{
    char buf[2048] __attribute__((aligned(8)));
    int dfd = (int)zc_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    long got;

    if (dfd < 0)
        return -errno;
    while (!rc && (got = zc_syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
        for (long off = 0; off < got && !rc;) {
            shim_dirent_t *e = (shim_dirent_t *)(buf + off);
            long num = shim_num(e->name);

            off += e->reclen;
            if (num >= 0)       /* (in /proc/self/fd, dfd itself is one of them) */
                rc = fn(dfd, num, arg);
        }
    zc_syscall(SYS_close, dfd);
    return rc;
}

typedef struct {
    char want[40];
    int len;
    int pid;            /* whose descriptors (its real pid) */
    int found;          /* the descriptor that holds it */
} shim_holds_t;

/* SOCKETS SEEN (issue 31): every socket a walk of a process's descriptors
 * passes is remembered (its pid, inode and number), so a later question
 * about another socket of that process costs one readlink, not another
 * walk: an event loop with 1,000 connections that pair in no particular
 * order walked its peer's table at almost every pairing (redis-benchmark
 * -c 1000: 102 readlinks per connection on the server).  A hint only,
 * checked by a readlink like any descriptor of the walk: a stale or torn
 * entry (a closed descriptor, a recycled pid, racing writers) only costs
 * the walk it would have cost.  Direct-mapped by inode, four ways; 256 KiB
 * of zeroed memory, touched only by walks. */
#define SHIM_SEEN 16384u
#define SHIM_SEEN_WAYS 4u
static struct {
    uint64_t ino;
    int32_t pid, fd;
} shim_seen[SHIM_SEEN];

static unsigned shim_seen_slot(uint64_t ino)
{
    return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 40) & (SHIM_SEEN - SHIM_SEEN_WAYS);
}

static void shim_seen_put(int pid, uint64_t ino, int fd)
{
    unsigned s = shim_seen_slot(ino), k = s + ((unsigned)fd & (SHIM_SEEN_WAYS - 1));

    for (unsigned i = s; i < s + SHIM_SEEN_WAYS; i++) {
        uint64_t e = __atomic_load_n(&shim_seen[i].ino, __ATOMIC_RELAXED);

        if (e == ino || !e) {
            k = i;
            break;
        }
    }
    __atomic_store_n(&shim_seen[k].ino, ino, __ATOMIC_RELAXED);
    __atomic_store_n(&shim_seen[k].pid, pid, __ATOMIC_RELAXED);
    __atomic_store_n(&shim_seen[k].fd, fd, __ATOMIC_RELAXED);
}

/* Where socket ino was seen in process pid, or -1. */
static int shim_seen_get(int pid, uint64_t ino)
{
    unsigned s = shim_seen_slot(ino);

    for (unsigned i = s; i < s + SHIM_SEEN_WAYS; i++)
        if (__atomic_load_n(&shim_seen[i].ino, __ATOMIC_RELAXED) == ino &&
            __atomic_load_n(&shim_seen[i].pid, __ATOMIC_RELAXED) == pid)
            return __atomic_load_n(&shim_seen[i].fd, __ATOMIC_RELAXED);
    return -1;
}

/* "socket:[N]" -> N, else 0. */
static uint64_t shim_socket_ino(const char *t, long n)
{
    uint64_t v = 0;
    long i = 8;

    if (n < 10 || memcmp(t, "socket:[", 8) || t[n - 1] != ']')
        return 0;
    for (; i < n - 1 && t[i] >= '0' && t[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(t[i] - '0');
    return i == n - 1 ? v : 0;
}

/* The walk reads every descriptor (not only up to the one it looks for):
 * what it passes is remembered for the next question (SOCKETS SEEN). */
static int shim_holds_fn(int dirfd, long num, void *arg)
{
    shim_holds_t *h = arg;
    char name[24], target[40];
    uint64_t ino;
    long n;

    zc_fmt(name, sizeof(name), "%ld", num);
    n = zc_syscall(SYS_readlinkat, dirfd, name, target, sizeof(target));
    if (n == h->len && !memcmp(target, h->want, (size_t)n))
        h->found = (int)num;
    if (n > 0 && (ino = shim_socket_ino(target, n)) != 0)
        shim_seen_put(h->pid, ino, (int)num);
    return 0;
}

/* Where the last socket found in a process was (by pid, a few slots):
 * a hint only, each one checked by a readlink like any descriptor of the
 * walk.  A process that opens connections one after the other gets the
 * lowest free number again (short connections: the same one; a growing
 * set: the next), so the proof costs one readlink there instead of a walk
 * of every descriptor the process holds (issue 31).  The step between the
 * last two found is tried first: a process that holds its connections
 * open finds the next number at once, one that closes them the same. */
#define SHIM_HINTS 64
static struct {
    int pid, fd, step;
} shim_hint[SHIM_HINTS];

static int shim_holds_hinted(int pid, const shim_holds_t *h, int *fd_p)
{
    unsigned slot = (unsigned)pid % SHIM_HINTS;
    int hpid = __atomic_load_n(&shim_hint[slot].pid, __ATOMIC_RELAXED);
    int last = __atomic_load_n(&shim_hint[slot].fd, __ATOMIC_RELAXED);
    int step = __atomic_load_n(&shim_hint[slot].step, __ATOMIC_RELAXED);
    static const int delta[] = { 0, 1, 2, -1, 3 };
    char path[48], target[40];
    long n;

    if (hpid != pid)
        return 0;
    for (unsigned i = 0; i <= sizeof(delta) / sizeof(delta[0]); i++) {
        int fd = i ? last + delta[i - 1] : last + step;

        if (fd < 0 || (i && delta[i - 1] == step))
            continue;
        zc_fmt(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
        n = zc_syscall(SYS_readlinkat, AT_FDCWD, path, target, sizeof(target));
        if (n == h->len && !memcmp(target, h->want, (size_t)n)) {
            *fd_p = fd;
            return 1;
        }
    }
    return 0;
}

int shim_proc_holds_socket(int pid, uint64_t ino)
{
    shim_holds_t h = { .found = -1 };
    char path[40] = "/proc/self/fd";
    int real = pid > 0 ? pid : zc_getpid(), fd = -1, held;

    h.len = (int)zc_fmt(h.want, sizeof(h.want), "socket:[%llu]", (unsigned long long)ino);
    h.pid = real;
    /* where a walk saw it first (no system call to look: a miss costs
     * nothing), then around the last number found (up to five readlinks) */
    if ((fd = shim_seen_get(real, ino)) >= 0)
        held = shim_proc_fd_is_socket(real, fd, ino) == 1;
    else
        held = 0;
    if (!held)
        held = shim_holds_hinted(real, &h, &fd);
    if (!held) {
        if (pid > 0)
            zc_fmt(path, sizeof(path), "/proc/%d/fd", pid);
        zc_stat_add(ZC_STAT_PROC_FD_WALKS, 1);
        shim_proc_each_num(path, shim_holds_fn, &h);
        fd = h.found;
        held = fd >= 0;
    }
    if (held) {
        unsigned slot = (unsigned)real % SHIM_HINTS;
        int last = __atomic_load_n(&shim_hint[slot].fd, __ATOMIC_RELAXED);
        int same = __atomic_load_n(&shim_hint[slot].pid, __ATOMIC_RELAXED) == real;

        /* (a step outside the deltas' span is not kept: 0) */
        __atomic_store_n(&shim_hint[slot].step,
                         same && fd - last >= -1 && fd - last <= 3 ? fd - last : 0,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&shim_hint[slot].pid, real, __ATOMIC_RELAXED);
        __atomic_store_n(&shim_hint[slot].fd, fd, __ATOMIC_RELAXED);
    }
    return held;
}

int shim_proc_fd_is_socket(int pid, int fd, uint64_t ino)
{
    char path[48], want[40], target[40];
    long n, w;

    if (pid <= 0 || fd < 0)
        return 0;
    w = (long)zc_fmt(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
    zc_fmt(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    n = zc_syscall(SYS_readlinkat, AT_FDCWD, path, target, sizeof(target));
    if (n < 0 && errno == ENOENT)
        return -1;
    return n == w && !memcmp(target, want, (size_t)n);
}

int shim_proc_seccomp_mode(void)
{
    char buf[4096];
    const char *p;
    long got = 0, n;
    int fd = (int)zc_syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC, 0, 0, 0);

    if (fd < 0)
        return -1;
    while (got < (long)sizeof(buf) - 1 &&
           (n = zc_syscall(SYS_read, fd, buf + got, sizeof(buf) - 1 - (size_t)got, 0, 0, 0)) > 0)
        got += n;
    zc_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    buf[got] = 0;
    p = strstr(buf, "\nSeccomp:");
    if (!p)
        return -1;
    for (p += 9; *p == ' ' || *p == '\t'; p++)
        ;
    return *p >= '0' && *p <= '9' ? *p - '0' : -1;
}

typedef struct {
    int *pids, max, n, pid;
} shim_children_t;

static int shim_children_fn(int dirfd, long tid, void *arg)
{
    shim_children_t *k = arg;
    char path[48], buf[512];
    int fd;
    long got;

    (void)dirfd;
    if (k->pid)
        zc_fmt(path, sizeof(path), "/proc/%d/task/%ld/children", k->pid, tid);
    else
        zc_fmt(path, sizeof(path), "/proc/self/task/%ld/children", tid);
    fd = (int)zc_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    got = zc_syscall(SYS_read, fd, buf, sizeof(buf) - 1);
    zc_syscall(SYS_close, fd);
    for (long i = 0; i < got && k->n < k->max;) {
        long v = 0;

        while (i < got && (buf[i] < '0' || buf[i] > '9'))
            i++;
        if (i >= got)
            break;
        while (i < got && buf[i] >= '0' && buf[i] <= '9')
            v = v * 10 + (buf[i++] - '0');
        k->pids[k->n++] = (int)v;
    }
    return k->n >= k->max;
}

int shim_proc_children(int *pids, int max)
{
    return shim_proc_children_of(0, pids, max);
}

int shim_proc_children_of(int pid, int *pids, int max)
{
    shim_children_t k = { pids, max, 0, pid };
    char path[32];

    if (pid)
        zc_fmt(path, sizeof(path), "/proc/%d/task", pid);
    shim_proc_each_num(pid ? path : "/proc/self/task", shim_children_fn, &k);
    return k.n;
}

/* --- exec targets --- */

/* 1 when the program headers (phnum of phentsize bytes at phoff) include
 * PT_INTERP, 0 when not, -1 unreadable.  p_type is the first 32-bit word of
 * a program header in both ELF classes. */
static int shim_elf_has_interp(int fd, uint64_t phoff, unsigned phnum, unsigned phentsize)
{
    for (unsigned i = 0; i < phnum && i < 128; i++) {
        uint32_t type;

        if (zc_syscall(SYS_pread64, fd, &type, sizeof(type), phoff + (uint64_t)i * phentsize) !=
            (long)sizeof(type))
            return -1;
        if (type == PT_INTERP)
            return 1;
    }
    return 0;
}

#if defined(__x86_64__)
#define SHIM_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define SHIM_ELF_MACHINE EM_AARCH64
#elif defined(__riscv)
#define SHIM_ELF_MACHINE EM_RISCV
#endif

/* The image behind descriptor fd: 1 dynamically linked for our class and
 * machine, 0 one that cannot load this library (static, set-ID to someone
 * else, file capabilities: secure-exec ignores LD_PRELOAD paths; another
 * ELF class or machine), -1 unknown; a script's interpreter in interp. */
static int shim_image_kind(int fd, char *interp, size_t isz)
{
    unsigned char h[256] __attribute__((aligned(8)));
    struct stat st;
    long n = zc_syscall(SYS_pread64, fd, h, sizeof(h), 0);

    interp[0] = 0;
    if (zc_syscall(SYS_fstat, fd, &st) == 0 &&
        (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
         ((st.st_mode & S_ISGID) && st.st_gid != getegid())))
        return 0;
    if (zc_syscall(SYS_fgetxattr, fd, "security.capability", NULL, 0) > 0)
        return 0;
    if (n >= 2 && h[0] == '#' && h[1] == '!') {
        size_t i = 2, k = 0;

        while (i < (size_t)n && (h[i] == ' ' || h[i] == '\t'))
            i++;
        while (i < (size_t)n && h[i] != ' ' && h[i] != '\t' && h[i] != '\n' && k + 1 < isz)
            interp[k++] = (char)h[i++];
        interp[k] = 0;
        return -1;
    }
    if (n < (long)sizeof(Elf64_Ehdr) || memcmp(h, ELFMAG, SELFMAG))
        return -1;
    if (h[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32))
        return 0;       /* the loader of the other class cannot load us */
    if (sizeof(void *) == 8) {
        const Elf64_Ehdr *e = (const Elf64_Ehdr *)h;

#ifdef SHIM_ELF_MACHINE
        if (e->e_machine != SHIM_ELF_MACHINE)
            return 0;
#endif
        return shim_elf_has_interp(fd, e->e_phoff, e->e_phnum, e->e_phentsize);
    } else {
        const Elf32_Ehdr *e = (const Elf32_Ehdr *)h;

        return shim_elf_has_interp(fd, e->e_phoff, e->e_phnum, e->e_phentsize);
    }
}

static int shim_open_exe(const char *path)
{
    return (int)zc_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
}

/* file as execvp finds it: the first PATH entry that has it executable. */
static int shim_open_searched(const char *file)
{
    extern char **environ;
    const char *path = "/bin:/usr/bin", *p;
    char buf[4096];
    size_t fl = strlen(file);

    for (size_t i = 0; environ && environ[i]; i++)
        if (!strncmp(environ[i], "PATH=", 5)) {
            path = environ[i] + 5;
            break;
        }
    for (p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : strlen(p);

        if (dl + fl + 2 <= sizeof(buf)) {
            memcpy(buf, dl ? p : ".", dl ? dl : 1);
            dl = dl ? dl : 1;
            buf[dl] = '/';
            memcpy(buf + dl + 1, file, fl + 1);
            if (zc_syscall(SYS_faccessat, AT_FDCWD, buf, X_OK) == 0)
                return shim_open_exe(buf);
        }
        if (!end)
            return -1;
        p = end;
    }
}

int shim_exec_image_preloads(const char *file, int search, int fd)
{
    char interp[256];
    int own = fd < 0, k;

    if (getuid() != geteuid() || getgid() != getegid())
        return 0;       /* secure-exec: LD_PRELOAD paths are ignored */
    if (own) {
        if (!file || !*file)
            return -1;
        fd = search && !strchr(file, '/') ? shim_open_searched(file) : shim_open_exe(file);
        if (fd < 0)
            return -1;
    }
    k = shim_image_kind(fd, interp, sizeof(interp));
    if (own)
        zc_syscall(SYS_close, fd);
    if (k < 0 && interp[0] == '/') {    /* a script: its interpreter decides */
        char inner[8];
        int ifd = shim_open_exe(interp);

        if (ifd < 0)
            return -1;
        k = shim_image_kind(ifd, inner, sizeof(inner));
        zc_syscall(SYS_close, ifd);
    }
    return k;
}
