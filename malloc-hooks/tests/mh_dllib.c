/* Loaded with dlopen by t_dlopen: allocates in its constructor (small,
 * placed and huge blocks) and hands the blocks to the program to free. */
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

static void *t_blocks[3];
static const size_t t_sizes[3] = { 100, 512 * 1024, 3 * 1024 * 1024 };

__attribute__((constructor)) static void t_dllib_ctor(void)
{
    for (int i = 0; i < 3; i++) {
        t_blocks[i] = malloc(t_sizes[i]);
        if (t_blocks[i])
            memset(t_blocks[i], 'a' + i, t_sizes[i]);
    }
}

API void *t_dllib_block(int i, size_t *n_p);
API void *t_dllib_block(int i, size_t *n_p)
{
    *n_p = t_sizes[i];
    return t_blocks[i];
}

API void *t_dllib_realloc(void *p, size_t n);
API void *t_dllib_realloc(void *p, size_t n)
{
    return realloc(p, n);
}
