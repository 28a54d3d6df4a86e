/* A statically linked echo for the localpath tier (case exec_static): the
 * dynamic loader never runs for it, so LD_PRELOAD naming libzcsock does not
 * apply, and a paired connection it inherits must have been handed back to
 * the kernel.  Usage: static_echo FD.  Echoes messages framed as a 32-bit
 * length and its bytes until a zero length, then exits 0. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static int io_all(int fd, void *p, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = out ? write(fd, (char *)p + done, n - done) : read(fd, (char *)p + done, n - done);

        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int fd = argc > 1 ? atoi(argv[1]) : -1;

    for (;;) {
        uint32_t n;
        char *buf;

        if (io_all(fd, &n, 4, 0))
            return 2;
        if (!n)
            break;
        buf = malloc(n);
        if (!buf || io_all(fd, buf, n, 0) || io_all(fd, buf, n, 1))
            return 3;
        free(buf);
    }
    close(fd);
    return 0;
}
