/* The local path: a paired connection's description for another image or
 * process, and its adoption (adopt.c). What the rest of the path may call of
 * it; the connection object and its locks are lp_int.h's. */
#ifndef LP_ADOPT_H
#define LP_ADOPT_H

#include "lp_int.h"

enum {
    LP_F_TX_RING = 1, LP_F_RX_RING = 2, LP_F_TX_NEVER = 4, LP_F_WR_SHUT = 8,
    LP_F_RD_SHUT = 16, LP_F_KERN_SHUT_WR = 32, LP_F_KERN_EOF = 64, LP_F_RX_PLAIN = 128,
    LP_F_ARMED = 256,   /* 4 bits, [dir][role]: lp_armed_bells */
};
unsigned lp_flags(const lp_conn_t *c);
int lp_inherit_one(const int *fds, int nfds, int memfd, int side, unsigned flags,
                   const uint64_t v[4], const int xfds[2]);
int path_local_handover_prepare(shim_fd_t *f, int fd, path_local_handover_t *h, int *memfd_p);
void path_local_hand_back(shim_fd_t *f, int fd, const char *why);
void path_local_handover_posted(shim_fd_t *f);
int path_local_handover_adopt(int fd, const path_local_handover_t *h, int memfd, int counted);

#endif
