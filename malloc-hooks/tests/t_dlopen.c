/* A dlopen'ed library allocates in its constructor; the program checks and
 * frees those blocks, reallocs some through the library, and closes it.
 * argv[1]: path of libmhdl.so. */
#include <malloc.h>

#include "t_mh.h"

int main(int argc, char **argv)
{
    void *(*block)(int, size_t *), *(*re)(void *, size_t);
    void *h;

    T_CHECK(argc > 1);
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    T_CHECK(h);
    block = (void *(*)(int, size_t *))dlsym(h, "t_dllib_block");
    re = (void *(*)(void *, size_t))dlsym(h, "t_dllib_realloc");
    T_CHECK(block && re);
    for (int i = 0; i < 3; i++) {
        size_t n;
        unsigned char *p = block(i, &n);

        T_CHECK(p && malloc_usable_size(p) >= n);
        T_CHECK(p[0] == 'a' + i && p[n - 1] == 'a' + i);
        if (i == 1) {
            p = re(p, 5 * n);
            T_CHECK(p && p[n - 1] == 'a' + i);
        }
        free(p);
    }
    T_CHECK(dlclose(h) == 0);
    printf("ok\n");
    return 0;
}
