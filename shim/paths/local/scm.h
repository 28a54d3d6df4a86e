/* The local path: SCM_RIGHTS and the per-process mailboxes (scm.c). What the
 * rest of the path may call of it; the connection object and its locks are
 * lp_int.h's. */
#ifndef LP_SCM_H
#define LP_SCM_H

#include "lp_int.h"

void path_local_mbox_ensure(void);
int path_local_mbox_usable(void);
void path_local_mbox_ensure_scm(void);
void path_local_mbox_idle(void);
/* Post our socket sock, lingering after our close, to process pid's mailbox
 * with the channel memfd as proof (0 or -errno); take the lingering socket
 * posted for the channel memfd serves (-1: none came). */
int lp_linger_post(int pid, int memfd, int sock);
int lp_linger_take(int memfd);
void path_local_mbox_fork_child(void);
void path_local_mbox_fork_parent(void);
void path_local_mbox_exit(void);
int path_local_mbox_moved(void *ctx, int from, int to);
void path_local_scm_send(int fd, const struct msghdr *msg);
void path_local_scm_received(struct msghdr *msg);

#endif
