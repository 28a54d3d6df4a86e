/* A socket read through io_uring (liburing): accept one connection on
 * 127.0.0.1:PORT, then IORING_OP_RECV into a buffer until EOF, writing
 * what arrives to stdout.  With FIRST (argv[2]), the first FIRST bytes are
 * read with recv() before the ring is made (a connection that would pair at
 * that first call).  Prints "listening" on stderr when ready. */
#include <arpa/inet.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (void *)&a, sizeof a) || listen(s, 4)) { perror("bind/listen"); return 1; }
    fprintf(stderr, "listening\n");
    int c = accept(s, NULL, NULL);
    if (c < 0) { perror("accept"); return 1; }
    static char buf[1 << 16];
    long first = argc > 2 ? atol(argv[2]) : 0;
    while (first > 0) {
        ssize_t n = recv(c, buf, first < (long)sizeof buf ? (size_t)first : sizeof buf, 0);
        if (n <= 0) { perror("recv"); return 1; }
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) return 1;
        first -= n;
    }
    struct io_uring ring;
    int e = io_uring_queue_init(8, &ring, 0);
    if (e < 0) { fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-e)); return 77; }
    for (;;) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        io_uring_prep_recv(sqe, c, buf, sizeof buf, 0);
        io_uring_submit(&ring);
        struct io_uring_cqe *cqe;
        if ((e = io_uring_wait_cqe(&ring, &cqe)) < 0) { fprintf(stderr, "wait_cqe: %s\n", strerror(-e)); return 1; }
        int r = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        if (r < 0) { fprintf(stderr, "recv: %s\n", strerror(-r)); return 1; }
        if (r == 0) break;
        if (fwrite(buf, 1, r, stdout) != (size_t)r) return 1;
    }
    io_uring_queue_exit(&ring);
    return fflush(stdout) ? 1 : 0;
}
