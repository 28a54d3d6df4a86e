/* A server that reads its socket through stdio (fdopen + fgets) and a
 * client that writes with send() in odd-sized pieces.
 *   fdopen_lines server PORT   accept one connection, fgets() every line,
 *                              write it to stdout; at EOF answer
 *                              "lines N\n" through fdopen(dup(fd), "w")
 *   fdopen_lines client PORT   send() stdin to the server in pieces of
 *                              1..8191 bytes, shutdown(SHUT_WR), copy the
 *                              answer to stdout */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int sock(int port, struct sockaddr_in *a) {
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return socket(AF_INET, SOCK_STREAM, 0);
}

int main(int argc, char **argv) {
    struct sockaddr_in a;
    if (argc < 3) return 2;
    int s = sock(atoi(argv[2]), &a), one = 1;
    if (s < 0) { perror("socket"); return 1; }
    if (!strcmp(argv[1], "server")) {
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, (void *)&a, sizeof a) || listen(s, 4)) { perror("bind/listen"); return 1; }
        fprintf(stderr, "listening\n");
        int c = accept(s, NULL, NULL);
        if (c < 0) { perror("accept"); return 1; }
        FILE *in = fdopen(c, "r"), *out = fdopen(dup(c), "w");
        char line[4096];
        long n = 0;
        while (fgets(line, sizeof line, in)) { fputs(line, stdout); n++; }
        if (ferror(in)) { perror("fgets"); return 1; }
        fprintf(out, "lines %ld\n", n);
        fclose(out); fclose(in);
        return fflush(stdout) ? 1 : 0;
    }
    if (connect(s, (void *)&a, sizeof a)) { perror("connect"); return 1; }
    static char buf[1 << 16];
    unsigned seed = 12345;
    size_t len;
    while ((len = fread(buf, 1, sizeof buf, stdin)) > 0) {
        for (size_t off = 0; off < len;) {
            seed = seed * 1103515245 + 12345;
            size_t k = 1 + (seed >> 8) % 8191;
            if (k > len - off) k = len - off;
            ssize_t w = send(s, buf + off, k, 0);
            if (w < 0) { perror("send"); return 1; }
            off += w;
        }
    }
    shutdown(s, SHUT_WR);
    ssize_t r;
    while ((r = recv(s, buf, sizeof buf, 0)) > 0) fwrite(buf, 1, r, stdout);
    if (r < 0) { perror("recv"); return 1; }
    return 0;
}
