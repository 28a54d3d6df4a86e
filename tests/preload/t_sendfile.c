/* sendfile, sendfile64 and splice between files, pipes and sockets: every
 * byte arrives, offsets advance as the kernel says. */
#include <fcntl.h>
#include <sys/sendfile.h>

#include "t_common.h"
#include "t_net.h"

#define T_FILE (1u << 20)

int t_main(void)
{
    char path[] = "/tmp/zc_t_sendfile_XXXXXX";
    unsigned char *ref = malloc(T_FILE), *got = malloc(T_FILE);
    int fd, c, s, p[2];
    off_t off = 0;
    loff_t loff;
    size_t total = 0;
    T_COUNT(sendfile); T_COUNT(splice);

    t_fill(ref, T_FILE, 3);
    fd = mkstemp(path);
    T_CHECK(fd >= 0);
    unlink(path);
    T_CHECK(write(fd, ref, T_FILE) == (ssize_t)T_FILE);
    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    /* sendfile in chunks, the peer reads in parallel through the socket buffer */
    while (total < T_FILE) {
        ssize_t n = sendfile(c, fd, &off, 65536);
        T_CHECK(n > 0);
        total += (size_t)n;
        T_CHECK(recv(s, got + total - (size_t)n, (size_t)n, MSG_WAITALL) == n);
    }
    T_CHECK(off == (off_t)T_FILE && memcmp(got, ref, T_FILE) == 0);
    T_CHECK(sendfile(c, fd, &off, 10) == 0);      /* at end of file */
    off = 5;
    T_CHECK(sendfile64(c, fd, &off, 5) == 5 && off == 10);
    T_CHECK(recv(s, got, 5, MSG_WAITALL) == 5 && !memcmp(got, ref + 5, 5));
    /* splice file -> pipe -> socket, and socket -> pipe */
    T_CHECK(pipe(p) == 0);
    loff = 100;
    T_CHECK(splice(fd, &loff, p[1], NULL, 4096, 0) == 4096 && loff == 4196);
    T_CHECK(splice(p[0], NULL, c, NULL, 4096, 0) == 4096);
    T_CHECK(splice(s, NULL, p[1], NULL, 4096, 0) > 0);
    T_CHECK(read(p[0], got, 4096) > 0 && !memcmp(got, ref + 100, 16));
    T_CHECK(sendfile(c, -1, NULL, 1) == -1 && errno == EBADF);
    close(p[0]);
    close(p[1]);
    close(fd);
    close(c);
    close(s);
    free(ref);
    free(got);
    T_CALLED(sendfile); T_CALLED(splice);
    T_CHECK(!t_preloaded() || t_stat("calls.sendfile64") > 0 || t_stat("calls.sendfile") > 0);
    return T_PASS;
}
