/* read, write, readv, writev on sockets, pipes and files; the fortify
 * variants __read_chk, __recv_chk and __recvfrom_chk (this file is built with
 * _FORTIFY_SOURCE=2 so the compiler emits them), including their overflow
 * check, which must still abort exactly as glibc's does. */
#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "t_common.h"
#include "t_net.h"

static size_t t_len(size_t n)
{
    volatile size_t v = n;

    return v;
}

static int t_overflow_aborts(int fd)
{
    pid_t pid = fork();
    int status;

    T_CHECK(pid >= 0);
    if (pid == 0) {
        char small[4];
        close(2);                   /* keep glibc's "buffer overflow" off the log */
        (void)!recv(fd, small, t_len(64), MSG_DONTWAIT);
        _exit(0);
    }
    T_CHECK(waitpid(pid, &status, 0) == pid);
    T_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    return T_PASS;
}

int t_main(void)
{
    int c, s, fd, p[2];
    char buf[32], a[4], b[8];
    struct iovec wv[2] = { { "abcd", 4 }, { "efghijkl", 8 } }, rv[2] = { { a, 4 }, { b, 8 } };
    struct sockaddr_storage from;
    socklen_t fl = sizeof(from);
    char path[] = "/tmp/zc_t_rw_XXXXXX";
    T_COUNT(read); T_COUNT(write); T_COUNT(readv); T_COUNT(writev);
    T_COUNT(__read_chk); T_COUNT(__recv_chk); T_COUNT(__recvfrom_chk);

    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    T_CHECK(write(c, "12345", 5) == 5);
    T_CHECK(read(s, buf, 5) == 5 && !memcmp(buf, "12345", 5));
    T_CHECK(writev(c, wv, 2) == 12);
    T_CHECK(readv(s, rv, 2) == 12 && !memcmp(a, "abcd", 4) && !memcmp(b, "efghijkl", 8));
    /* lengths unknown at compile time make the fortified wrappers call the
     * _chk variants */
    T_CHECK(write(c, "xyz", 3) == 3);
    T_CHECK(recv(s, buf, t_len(3), MSG_WAITALL) == 3 && !memcmp(buf, "xyz", 3));
    T_CHECK(write(c, "q", 1) == 1);
    T_CHECK(recvfrom(s, buf, t_len(1), 0, (struct sockaddr *)&from, &fl) == 1 && buf[0] == 'q');
    T_CHECK(write(c, "rd", 2) == 2);
    T_CHECK(read(s, buf, t_len(2)) == 2 && !memcmp(buf, "rd", 2));
    T_CHECK(t_overflow_aborts(s) == T_PASS);
    close(c);
    close(s);
    /* pipes and files go straight through, errno included */
    T_CHECK(pipe(p) == 0);
    T_CHECK(write(p[1], "pp", 2) == 2 && read(p[0], buf, sizeof(buf)) == 2);
    close(p[1]);
    T_CHECK(read(p[0], buf, sizeof(buf)) == 0);
    close(p[0]);
    fd = mkstemp(path);
    T_CHECK(fd >= 0);
    T_CHECK(writev(fd, wv, 2) == 12 && lseek(fd, 0, SEEK_SET) == 0);
    T_CHECK(readv(fd, rv, 2) == 12 && !memcmp(a, "abcd", 4) && !memcmp(b, "efghijkl", 8));
    close(fd);
    unlink(path);
    T_CHECK(read(-5, buf, 1) == -1 && errno == EBADF);
    T_CHECK(write(1000, buf, 1) == -1 && errno == EBADF);
    T_CALLED(read); T_CALLED(write); T_CALLED(readv); T_CALLED(writev);
    T_CALLED(__read_chk); T_CALLED(__recv_chk); T_CALLED(__recvfrom_chk);
    return T_PASS;
}
