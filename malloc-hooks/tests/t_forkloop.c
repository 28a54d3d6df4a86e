/* Many forks, each with placed blocks alive across it (more generations
 * than there are arena slots), children checking their snapshot, the
 * parent freeing old blocks so generations are reclaimed; contents checked
 * throughout.  argv[1]: rounds (default 100). */
#include <sys/wait.h>
#include <unistd.h>

#include "t_mh.h"

#define KEEP 4

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    unsigned char *live[KEEP] = { 0 };
    size_t len[KEEP] = { 0 };

    for (int r = 0; r < rounds; r++) {
        int k = r % KEEP, st;
        pid_t pid;

        if (live[k]) {
            T_CHECK(t_same(live[k], len[k], (unsigned)(r - KEEP)));
            free(live[k]);
        }
        len[k] = (size_t)(200 + r * 37 % 900) * 1024;
        live[k] = malloc(len[k]);
        T_CHECK(live[k]);
        t_fill(live[k], len[k], (unsigned)r);
        pid = fork();
        T_CHECK(pid >= 0);
        if (pid == 0) {
            unsigned char *n = malloc(300 * 1024);

            for (int j = 0; j < KEEP; j++)
                if (live[j] && !t_same(live[j], len[j], (unsigned)(r - ((r - j) % KEEP + KEEP) % KEEP)))
                    _exit(2);
            memset(live[k], 0, len[k]);        /* must not reach the parent */
            if (!n)
                _exit(3);
            free(n);
            _exit(0);
        }
        T_CHECK(waitpid(pid, &st, 0) == pid);
        T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        T_CHECK(t_same(live[k], len[k], (unsigned)r));
    }
    for (int k = 0; k < KEEP; k++)
        free(live[k]);
    if (t_placement()) {
        unsigned char *p = malloc(1u << 20);   /* generations were reclaimed */

        T_CHECK(p && t_in_memfd(p));
        free(p);
    }
    printf("ok: %d forks\n", rounds);
    return 0;
}
