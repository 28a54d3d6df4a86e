/* fork keeps process isolation for placed (MAP_SHARED memfd) blocks: the
 * child sees the parent's data as of fork, neither sees the other's later
 * writes, both can allocate, free and realloc afterwards. */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_mh.h"

#define MB (1024u * 1024u)

int main(void)
{
    unsigned char *a = malloc(4 * MB), *b = malloc(300 * 1024);
    int go[2], done[2], st;
    pid_t pid;
    char c;

    T_CHECK(a && b && pipe(go) == 0 && pipe(done) == 0);
    memset(a, 'P', 4 * MB);
    memset(b, 'p', 300 * 1024);
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        unsigned char *n = malloc(2 * MB);

        if (a[0] != 'P' || a[4 * MB - 1] != 'P' || b[1000] != 'p' || !n)
            _exit(2);
        memset(a, 'C', 4 * MB);               /* must not reach the parent */
        memset(n, 'n', 2 * MB);
        n = realloc(n, 6 * MB);
        if (!n || n[MB] != 'n')
            _exit(3);
        free(n);
        if (write(done[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(4);
        if (b[1000] != 'p')                   /* parent wrote 'q' meanwhile */
            _exit(5);
        free(b);
        free(a);
        _exit(0);
    }
    T_CHECK(read(done[0], &c, 1) == 1);
    T_CHECK(a[0] == 'P' && a[2 * MB] == 'P');
    memset(b, 'q', 300 * 1024);
    T_CHECK(write(go[1], "x", 1) == 1);
    T_CHECK(waitpid(pid, &st, 0) == pid);
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    T_CHECK(a[4 * MB - 1] == 'P' && b[0] == 'q');
    /* after the fork, DONTNEED must still read back zeros (private memory) */
    if ((uintptr_t)a % 4096 == 0) {
        T_CHECK(madvise(a, 2 * MB, MADV_DONTNEED) == 0);
        T_CHECK(a[0] == 0 && a[2 * MB - 1] == 0 && a[2 * MB] == 'P');
    }
    free(a);
    free(b);
    a = malloc(4 * MB);                        /* the pool still works */
    T_CHECK(a);
    free(a);
    printf("ok\n");
    return 0;
}
