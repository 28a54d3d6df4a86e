/* Case seccomp_exec: a program started under a seccomp filter it inherited
 * (systemd's SystemCallFilter=, a sandbox that execs) must not pair: a
 * system call the local path adds could be refused or kill it.  The parent
 * installs an allow-everything filter and execs this program again with
 * LD_PRELOAD kept; the child connects to itself over TCP loopback (which
 * pairs when nothing forbids it), moves 1 MiB both ways, checks every byte
 * and asks the library's counters that nothing paired.
 *
 *   seccomp_exec          parent (filter, exec)
 *   seccomp_exec child    the check (exit 0 pass, 1 fail, 77 skip) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what)
{
    fprintf(stderr, "seccomp_exec: FAIL: %s\n", what);
    return 1;
}

static int child(void)
{
    int (*stat_get)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    static unsigned char out[65536], in[65536];
    uint64_t acc = 0, con = 0;
    int ls, c, s, i;

    ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, len) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &len))
        return fail("listen");
    c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, len))
        return fail("connect");
    s = accept(ls, NULL, NULL);
    if (s < 0)
        return fail("accept");
    for (i = 0; i < 16; i++) {       /* 16 x 64 KiB each way */
        int from = i % 2 ? s : c, to = i % 2 ? c : s;
        size_t got = 0;

        for (size_t k = 0; k < sizeof(out); k++)
            out[k] = (unsigned char)(k * 31 + i);
        if (send(from, out, sizeof(out), 0) != (ssize_t)sizeof(out))
            return fail("send");
        while (got < sizeof(in)) {
            ssize_t n = recv(to, in + got, sizeof(in) - got, 0);

            if (n <= 0)
                return fail("recv");
            got += (size_t)n;
        }
        if (memcmp(in, out, sizeof(in)))
            return fail("bytes differ");
    }
    if (!stat_get) {
        fprintf(stderr, "seccomp_exec: the library is not loaded\n");
        return 77;
    }
    stat_get("local.paired.accepted", &acc);
    stat_get("local.paired.connected", &con);
    fprintf(stderr, "seccomp_exec: paired accepted %llu connected %llu\n",
            (unsigned long long)acc, (unsigned long long)con);
    if (acc || con)
        return fail("a connection paired under an inherited seccomp filter");
    return 0;
}

int main(int argc, char **argv)
{
    struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
    struct sock_fprog prog = { 1, allow };

    if (argc > 1 && !strcmp(argv[1], "child"))
        return child();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0)) {
        perror("seccomp_exec: installing the filter");
        return 77;
    }
    execl("/proc/self/exe", argv[0], "child", (char *)NULL);
    perror("seccomp_exec: exec");
    return 1;
}
