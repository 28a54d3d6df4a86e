/* The local path: exec: inheritance and hand-back (exec.c). What the rest of
 * the path may call of it; the connection object and its locks are
 * lp_int.h's. */
#ifndef LP_EXEC_H
#define LP_EXEC_H

#include "lp_int.h"

size_t lp_exec_prepare(const shim_exec_t *e, char *buf, size_t bufsz);
void path_local_exec_failed(void);
void path_local_inherit(void);

#endif
