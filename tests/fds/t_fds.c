/* Tier "fds": descriptor hygiene (issue 11 §2).  Run with and without the
 * library; the same checks hold either way:
 *
 *   start  re-exec this program with only 0, 1 and 2 open (close_range, so
 *          nothing the test environment leaked counts), then run "clean"
 *   clean  the checks below
 *   list   print the open descriptors ("fd cloexec" per line) and exit
 *
 * Checks, in one process that starts with exactly 0, 1 and 2:
 *   1. at start-up, and after large allocations, the open descriptors are
 *      exactly 0, 1, 2: the library holds none (no arena memfd, no
 *      unwinder pipe);
 *   2. the first socket() is fd 3; a TCP connection to ourselves
 *      (listener, connect, accept, bytes both ways: with the library it
 *      must pair) takes 4, 5, 6; every descriptor that is not the
 *      program's sits at or above the top band of the soft RLIMIT_NOFILE (the
 *      library's floor) and is close-on-exec;
 *   3. fork + exec passing the paired connection (pass_fds style: the child
 *      keeps 0-2 and what it passes, closes the rest, execs "list"): the
 *      new image may also hold the connection's hand-over (ZCSOCK_INHERIT),
 *      but only above the floor and close-on-exec;
 *   4. once the connection and its listener are closed: 0, 1, 2 and at most
 *      the two sockets the library keeps for the process's life (its
 *      sock_diag socket and its mailbox), above the floor; without the
 *      library exactly 0, 1, 2;
 *      (with ZCSOCK_ALLOC_PLACEMENT=1 the allocations of 1 leave arena
 *      memfds, which must sit above the floor, close-on-exec; none exists
 *      at start-up either way)
 *   2b. while the connection is paired, a same-user process (a child)
 *      sees the library's memfds (the ring, arenas) in /proc/PID/fd but
 *      cannot open them: EACCES (they are mode 0), so it cannot read or
 *      write connection data or placed heap memory (issue 11: descriptors
 *      as an exposure).  Only checked when not root (CAP_DAC_OVERRIDE opens
 *      anything): run.sh runs the tier as an unprivileged user too;
 *   5. an AF_UNIX socket, a pipe and another paired connection (the
 *      library then holds a mailbox, a beacon, rings) take 3 to 8 in order,
 *      nothing of the library sits below the floor, and a child passed the
 *      AF_UNIX socket and the pipe's read end holds exactly 0, 1, 2 and
 *      those two.
 *
 * Exit 0 pass, 1 fail. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <sys/stat.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/zc_test.h"

#define T_MAXFD 256

#define T_CHECK(c)                                                                      \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); \
            t_dump("open descriptors");                                                 \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* A hygiene expectation: reported, and the run goes on so that every
 * broken one shows (the exit status is 1). */
#define T_EXPECT(c)                                                                     \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);               \
            t_dump("open descriptors");                                                 \
            t_failed = 1;                                                               \
        }                                                                               \
    } while (0)

static int t_failed;
static int t_placing;   /* ZCSOCK_ALLOC_PLACEMENT=1: arena memfds are expected */
static int t_floor;     /* the library's floor: the top of the soft RLIMIT_NOFILE */

/* The open descriptors, ascending, without the one used to list them. */
static int t_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0, self;

    if (!d)
        return -1;
    self = dirfd(d);
    while ((e = readdir(d)) != NULL && n < max) {
        int fd;

        if (e->d_name[0] == '.')
            continue;
        fd = atoi(e->d_name);
        if (fd != self)
            fds[n++] = fd;
    }
    closedir(d);
    for (int i = 1; i < n; i++)         /* insertion sort, n <= T_MAXFD */
        for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
            int t = fds[j];

            fds[j] = fds[j - 1];
            fds[j - 1] = t;
        }
    return n;
}

static void t_dump(const char *what)
{
    int fds[T_MAXFD], n = t_fds(fds, T_MAXFD);

    fprintf(stderr, "%s:", what);
    for (int i = 0; i < n; i++) {
        char path[64], target[256];
        ssize_t len;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[i]);
        len = readlink(path, target, sizeof(target) - 1);
        target[len > 0 ? len : 0] = 0;
        fprintf(stderr, " %d(%s)", fds[i], target);
    }
    fprintf(stderr, "\n");
}

/* The open descriptors are exactly want[0..n). */
static int t_exactly(const int *want, int n)
{
    int fds[T_MAXFD], got = t_fds(fds, T_MAXFD);

    if (got != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (fds[i] != want[i])
            return 0;
    return 1;
}

static int t_is_mine(int fd, const int *mine, int n)
{
    for (int i = 0; i < n; i++)
        if (mine[i] == fd)
            return 1;
    return 0;
}

/* Every open descriptor that is not in mine sits at or above the floor and
 * is close-on-exec. */
static int t_others_high(const int *mine, int n)
{
    int fds[T_MAXFD], got = t_fds(fds, T_MAXFD);

    for (int i = 0; i < got; i++) {
        if (t_is_mine(fds[i], mine, n))
            continue;
        if (fds[i] < t_floor || !(fcntl(fds[i], F_GETFD) & FD_CLOEXEC)) {
            fprintf(stderr, "descriptor %d is not the program's and is below %d or "
                    "inheritable\n", fds[i], t_floor);
            return 0;
        }
    }
    return 1;
}

/* A counter of the library, or -1 without it. */
static long long t_stat(const char *name)
{
    int (*get)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    uint64_t v;

    return get && get(name, &v) == 0 ? (long long)v : -1;
}

static void t_allocate(void)
{
    char *p = malloc(4 << 20), *q = calloc(1, 1 << 20), *r = NULL;
    void *m;

    T_CHECK(p && q);
    memset(p, 1, 4 << 20);
    for (size_t n = 1 << 10; n <= (8u << 20); n *= 2) {
        char *t = realloc(r, n);

        T_CHECK(t);
        r = t;
        r[n - 1] = 2;
    }
    free(r);
    free(q);
    free(p);
    m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    T_CHECK(m != MAP_FAILED);
    T_CHECK(munmap(m, 1 << 20) == 0);
}

/* A TCP connection to ourselves over loopback: *l listener, *c client,
 * *a accepted; bytes both ways, twice, so that with the library the two
 * ends pair (the client attaches after the server's first bytes). */
static void t_connection(int *l, int *c, int *a)
{
    struct sockaddr_in sin;
    char buf[4096];

    *l = zt_listen_lo(4, &sin);
    T_CHECK(*l >= 0);
    T_CHECK(zt_accept_pair(*l, &sin, c, a) == 0);
    for (int round = 0; round < 2; round++) {
        memset(buf, 'a' + round, sizeof(buf));
        T_CHECK(send(*c, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
        T_CHECK(recv(*a, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf));
        T_CHECK(send(*a, buf, 100, 0) == 100);
        T_CHECK(recv(*c, buf, 100, MSG_WAITALL) == 100);
        T_CHECK(buf[0] == 'a' + round && buf[99] == 'a' + round);
    }
}

/* Fork, keep 0 and 2, put a report pipe on 1, keep pass[0..n), close the
 * rest, exec "list"; the lines the new image prints ("fd cloexec") go to
 * got/cloexec.  Returns how many. */
static char t_self[4096];

static int t_child_list(const int *pass, int n, int *got, int *cloexec)
{
    int p[2], status, k = 0;
    pid_t pid;
    FILE *f;

    T_CHECK(pipe2(p, O_CLOEXEC) == 0);
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        int prev = 2;

        if (dup2(p[1], 1) != 1)
            _exit(2);
        for (int i = 0; i < n; i++)     /* pass[] ascending, all above 2 */
            fcntl(pass[i], F_SETFD, 0);
        /* close everything but 0-2 and pass[], like subprocess's
         * _close_open_fds (close_range between the kept numbers) */
        for (int i = 0; i <= n; i++) {
            unsigned hi = i < n ? (unsigned)pass[i] - 1 : ~0u;

            if ((unsigned)prev + 1 <= hi)
                close_range((unsigned)prev + 1, hi, 0);
            if (i < n)
                prev = pass[i];
        }
        execl(t_self, t_self, "list", (char *)NULL);
        _exit(3);
    }
    close(p[1]);
    f = fdopen(p[0], "r");
    T_CHECK(f);
    while (k < T_MAXFD && fscanf(f, "%d %d", &got[k], &cloexec[k]) == 2)
        k++;
    fclose(f);
    T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return k;
}

static int t_list(void)
{
    int fds[T_MAXFD], n = t_fds(fds, T_MAXFD);

    for (int i = 0; i < n; i++)
        printf("%d %d\n", fds[i], (fcntl(fds[i], F_GETFD) & FD_CLOEXEC) != 0);
    return 0;
}

/* In a forked child, a same-user process without privileges: every
 * descriptor of the parent that is one of the library's memfds can be seen
 * (readlink needs the same PTRACE_MODE_READ as open) but not opened.
 * Returns how many there were, -1 when one could be opened, -2 as root
 * (not checked: root opens anything). */
static int t_memfds_closed_to_others(void)
{
    pid_t parent = getpid(), pid;
    int status;

    if (geteuid() == 0)
        return -2;
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        char path[64], link[256];
        int fds[T_MAXFD], n, seen = 0;

        n = t_fds(fds, T_MAXFD);    /* the parent's numbers: inherited */
        for (int i = 0; i < n; i++) {
            ssize_t len;
            int fd;

            snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)parent, fds[i]);
            len = readlink(path, link, sizeof(link) - 1);
            if (len <= 0)
                continue;   /* the child's own listing descriptor */
            link[len] = 0;
            if (strncmp(link, "/memfd:zcsock", 13))
                continue;
            seen++;
            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0 || errno != EACCES) {
                fprintf(stderr, "opened %s (%s) as a same-user process: %s\n", path, link,
                        fd >= 0 ? "allowed" : strerror(errno));
                _exit(121);
            }
        }
        _exit(seen > 100 ? 100 : seen);
    }
    T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    return WEXITSTATUS(status) == 121 ? -1 : WEXITSTATUS(status);
}

/* A connection to ourselves; with the library it must have paired. */
static void t_paired(int *l, int *c, int *a, long long before)
{
    t_connection(l, c, a);
    if (t_stat("local.paired.accepted") >= 0)
        T_CHECK(t_stat("local.paired.accepted") == before + 1 &&
                t_stat("local.paired.connected") == before + 1);
}

static void t_clean(void)
{
    static const int std[] = { 0, 1, 2 };
    int l, c, a, s, u, p[2], got[T_MAXFD], cx[T_MAXFD], k, j = 0;
    int lib = t_stat("sockets.created") >= 0;

    /* 1: nothing at start-up, nothing after allocating (with placement
     * asked for, ZCSOCK_ALLOC_PLACEMENT=1, or turned on by page exchange
     * where shared memory has 2 MiB pages, the allocations make an arena
     * memfd: above the floor, close-on-exec, and not before) */
    T_EXPECT(t_exactly(std, 3));
    if (lib && t_stat("mh.status") > 0 && (t_stat("mh.status") & 0x04 /* MH_ST_PLACEMENT_ACTIVE */))
        t_placing = 1;
    t_allocate();
    if (t_placing)
        T_EXPECT(t_others_high(std, 3));
    else
        T_EXPECT(t_exactly(std, 3));
    printf("1. start-up and allocations: descriptors 0 1 2 only%s\n",
           t_placing ? " (and arenas above the floor)" : "");

    /* 2: the first socket is 3; a paired connection keeps 4 5 6 */
    s = socket(AF_INET, SOCK_STREAM, 0);
    T_CHECK(s >= 0);
    T_EXPECT(s == 3);
    t_paired(&l, &c, &a, 0);
    T_EXPECT(l == 4 && c == 5 && a == 6);
    {
        int mine[] = { 0, 1, 2, s, l, c, a };

        T_EXPECT(t_others_high(mine, 7));
    }
    printf("2. first socket() is 3; listener, client, accepted are 4 5 6 (%s)\n",
           lib ? "paired" : "no library");
    {
        int memfds = t_memfds_closed_to_others();

        if (memfds == -2) {
            printf("2b. as root: the same-user check runs in the unprivileged runs\n");
        } else {
            /* with the library the connection's ring is one at least */
            T_EXPECT(memfds >= (lib ? 1 : 0));
            printf("2b. %d memfd(s) of the library, none opened by a same-user process\n",
                   memfds < 0 ? 0 : memfds);
        }
    }

    /* 5: the paired connection passed on: its hand-over only above the floor */
    {
        int pass[] = { s, c };

        k = t_child_list(pass, 2, got, cx);
        for (int i = 0; i < k; i++) {
            if (got[i] <= 2 || got[i] == s || got[i] == c) {
                j++;
                continue;
            }
            fprintf(stderr, "child holds %d (cloexec %d) besides what it was passed\n",
                    got[i], cx[i]);
            T_EXPECT(got[i] >= t_floor && cx[i]);
        }
        T_EXPECT(j == 5);
    }
    printf("3. fork+exec passing the paired connection: nothing else below %d\n", t_floor);

    /* 3: once closed, nothing of the connections stays; the library keeps
     * at most its sock_diag socket and its mailbox, above the floor */
    close(c);
    close(a);
    close(l);
    close(s);
    {
        int fds[T_MAXFD], got = t_fds(fds, T_MAXFD), sockets = 0;

        T_EXPECT(t_others_high(std, 3));
        for (int i = 0; i < got; i++) {
            struct stat st;

            if (fds[i] <= 2 || fstat(fds[i], &st) != 0)
                continue;
            if (S_ISSOCK(st.st_mode))
                sockets++;
            else if (!t_placing)
                T_EXPECT(!"a descriptor of the library's that is not a socket stayed");
        }
        T_EXPECT(sockets <= 2);
        T_EXPECT(sockets == 0 || t_stat("local.paired.accepted") >= 0);
    }
    printf("4. after the paired connection and its listener closed: 0 1 2 and at most "
           "the library's two sockets, above the floor\n");

    /* 4, 6: an AF_UNIX socket, a pipe, a listener, a paired connection: the
     * program's numbers are 3 to 8 in order, whatever the library holds for
     * them (a mailbox, a beacon, rings) sits above the floor, and a child
     * passed two of them holds exactly those */
    u = socket(AF_UNIX, SOCK_STREAM, 0);
    T_CHECK(u >= 0 && pipe(p) == 0);
    T_EXPECT(u == 3 && p[0] == 4 && p[1] == 5);
    t_paired(&l, &c, &a, lib ? 1 : 0);
    T_EXPECT(l == 6 && c == 7 && a == 8);
    {
        int mine[] = { 0, 1, 2, u, p[0], p[1], l, c, a };
        int pass[] = { u, p[0] };

        T_EXPECT(t_others_high(mine, 9));
        k = t_child_list(pass, 2, got, cx);
        T_EXPECT(k == 5 && got[0] == 0 && got[1] == 1 && got[2] == 2 && got[3] == u &&
                got[4] == p[0]);
    }
    printf("5. fork+exec passing %d %d: the new image holds exactly 0 1 2 %d %d\n", u, p[0],
           u, p[0]);
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    ssize_t len;

    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < 64)
        return printf("skip: RLIMIT_NOFILE %llu\n", (unsigned long long)rl.rlim_cur), 77;
    {   /* the top of the soft limit: its last quarter, at most 1,024
         * numbers, never above 65,536 (common/zc_fd.h) */
        rlim_t top = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;

        t_floor = (int)(top - (top / 4 < 1024 ? top / 4 : 1024));
    }
    if (argc > 1 && !strcmp(argv[1], "list"))
        return t_list();
    len = readlink("/proc/self/exe", t_self, sizeof(t_self) - 1);
    if (len <= 0)
        return 1;
    t_self[len] = 0;
    t_placing = getenv("ZCSOCK_ALLOC_PLACEMENT") && !strcmp(getenv("ZCSOCK_ALLOC_PLACEMENT"), "1") &&
                getenv("LD_PRELOAD");
    if (argc > 1 && !strcmp(argv[1], "clean")) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        t_clean();
        printf("%s\n", t_failed ? "FAILED" : "ok");
        return t_failed;
    }
    if (argc > 1 && !strcmp(argv[1], "start")) {
        fflush(NULL);
        if (close_range(3, ~0u, 0))
            return 1;
        execl(t_self, t_self, "clean", (char *)NULL);
        return 1;
    }
    fprintf(stderr, "usage: %s start|clean|list\n", argv[0]);
    return 2;
}
