/* send, sendto, recv, recvfrom with MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT,
 * EAGAIN, EPIPE with and without SIGPIPE, ECONNRESET, EOF; large transfers
 * verified byte by byte, with the send buffer overwritten right after send
 * returns (contract: the peer gets the contents at the time of the call). */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "t_common.h"
#include "t_net.h"

#define T_BIG (8u << 20)

static volatile sig_atomic_t t_sigpipes;

static void t_on_sigpipe(int sig)
{
    (void)sig;
    t_sigpipes++;
}

/* Child: send T_BIG bytes in varied chunks, scribbling over each chunk right
 * after send() returns. */
static int t_sender(int fd)
{
    unsigned char *buf = malloc(T_BIG), *ref = malloc(T_BIG);
    size_t off = 0, chunk = 1;

    t_fill(ref, T_BIG, 1);
    while (off < T_BIG) {
        size_t n = chunk < T_BIG - off ? chunk : T_BIG - off;
        ssize_t w;

        memcpy(buf + off, ref + off, n);
        w = send(fd, buf + off, n, 0);
        if (w <= 0)
            return 1;
        memset(buf + off, 0xAA, (size_t)w);   /* overwrite what was sent */
        off += (size_t)w;
        chunk = chunk * 3 + 1;
        if (chunk > (1u << 20))
            chunk = 7;
    }
    return 0;
}

static int t_bulk(void)
{
    int c, s, status;
    unsigned char *got = malloc(T_BIG), *ref = malloc(T_BIG);
    pid_t pid;

    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    t_fill(ref, T_BIG, 1);
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0)
        _exit(t_sender(c));
    close(c);
    T_CHECK(recv(s, got, T_BIG, MSG_WAITALL) == (ssize_t)T_BIG);
    T_CHECK(memcmp(got, ref, T_BIG) == 0);
    T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status));
    T_CHECK(recv(s, got, 1, 0) == 0);     /* EOF once the child is gone */
    close(s);
    free(got);
    free(ref);
    return T_PASS;
}

int t_main(void)
{
    int c, s, rc, one = 1;
    char buf[64];
    struct sockaddr_storage from;
    socklen_t fromlen = sizeof(from);
    struct linger lg = { 1, 0 };
    T_COUNT(send); T_COUNT(sendto); T_COUNT(recv); T_COUNT(recvfrom);
    uint64_t copy0 = t_stat("path.copy.send_bytes"), local0 = t_stat("path.local.send_bytes");

    signal(SIGPIPE, t_on_sigpipe);
    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    T_CHECK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
    T_CHECK(send(c, "hello", 5, 0) == 5);
    T_CHECK(sendto(c, "world", 5, 0, NULL, 0) == 5);
    T_CHECK(recv(s, buf, 3, MSG_PEEK | MSG_WAITALL) == 3 && !memcmp(buf, "hel", 3));
    T_CHECK(recv(s, buf, 10, MSG_WAITALL) == 10 && !memcmp(buf, "helloworld", 10));
    T_CHECK(recv(s, buf, 10, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    T_CHECK(send(s, "x", 1, 0) == 1);
    T_CHECK(recvfrom(c, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen) == 1);
    /* both ends have made a data call: the client attached at its receive
     * (rule R3), so what it sends now goes through the ring, unless the
     * local path is off */
    T_CHECK(send(c, "ring", 4, 0) == 4);
    T_CHECK(recv(s, buf, 4, MSG_WAITALL) == 4 && !memcmp(buf, "ring", 4));
    if (t_preloaded() && t_expect_local()) {
        T_CHECK(t_stat("path.local.send_bytes") >= local0 + 4);
        T_CHECK(t_stat("local.paired.connected") >= 1 && t_stat("local.paired.accepted") >= 1);
    } else if (t_preloaded()) {
        T_CHECK(t_stat("path.local.send_bytes") == local0);
        T_CHECK(t_stat("path.copy.send_bytes") >= copy0 + 15);
        T_CHECK(t_stat("local.paired.connected") == 0);
    }
    /* EPIPE after the peer closed: with MSG_NOSIGNAL no signal, without it one */
    close(s);
    usleep(20000);
    rc = (int)send(c, "a", 1, 0);            /* may still succeed once (RST pending) */
    usleep(20000);
    if (rc == 1)
        rc = (int)send(c, "a", 1, MSG_NOSIGNAL);
    T_CHECK(rc == -1 && (errno == EPIPE || errno == ECONNRESET));
    T_CHECK(send(c, "a", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
    rc = t_sigpipes;
    T_CHECK(send(c, "a", 1, 0) == -1 && errno == EPIPE);
    T_CHECK(t_sigpipes == rc + 1);
    close(c);
    /* ECONNRESET: abortive close by the peer with unread data */
    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    T_CHECK(send(c, "data", 4, 0) == 4);
    usleep(20000);
    T_CHECK(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
    close(s);
    usleep(20000);
    T_CHECK(recv(c, buf, sizeof(buf), 0) == -1 && errno == ECONNRESET);
    close(c);
    T_CHECK(send(-1, "a", 1, 0) == -1 && errno == EBADF);
    T_CHECK(recv(0 + 1000, buf, 1, 0) == -1 && errno == EBADF);
    rc = t_bulk();
    if (rc != T_PASS)
        return rc;
    T_CALLED(send); T_CALLED(sendto); T_CALLED(recv); T_CALLED(recvfrom);
    return T_PASS;
}
