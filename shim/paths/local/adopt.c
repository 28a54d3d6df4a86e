/* The local path's hand-over: a paired connection described for another
 * image (exec.c) or process (SCM_RIGHTS, scm.c), and adopted there from
 * that description and the channel's memfd.  A feature (layer L2,
 * scripts/check-layers.py): exec.c and scm.c call it, it calls neither. */
#include "lp_int.h"
#include "adopt.h"
#include "handback.h"
#include "xchg.h"

/* Which of our announcements may be out with a doorbell byte to come when
 * claimed (socket kind): a bit per [dir][role] from LP_F_ARMED.  The next
 * holder takes them over, so that a hand-back of its counts every doorbell
 * owed to the socket exactly (lp_rv_owed): taking the creator's initial
 * ones instead counted one claimed and counted already, and a data byte was
 * read as that doorbell. */
static unsigned lp_armed_bells(const local_ring_t *ch)
{
    unsigned bits = 0;
    int d, r;

    for (d = 0; d < 2; d++)
        for (r = 0; r < 2; r++)
            if (ch->armed[d][r] && ch->wait_kind[d][r] != LOCAL_RING_WAIT_FUTEX &&
                ch->wait_kind[d][r] != LOCAL_RING_WAIT_EVENTFD)
                bits |= LP_F_ARMED << (d * 2 + r);
    return bits;
}

static void lp_armed_take(local_ring_t *ch, unsigned flags)
{
    int d, r;

    for (d = 0; d < 2; d++)
        for (r = 0; r < 2; r++) {
            ch->armed[d][r] = !!(flags & (LP_F_ARMED << (d * 2 + r)));
            ch->wait_kind[d][r] = LOCAL_RING_WAIT_SOCKET;
        }
}

unsigned lp_flags(const lp_conn_t *c)
{
    return (lp_tx_ring(c) ? LP_F_TX_RING : 0) | (lp_rx_ring(c) ? LP_F_RX_RING : 0) |
           (lp_tx_plain(c) ? LP_F_TX_NEVER : 0) | (c->wr_shut ? LP_F_WR_SHUT : 0) |
           (c->rd_shut ? LP_F_RD_SHUT : 0) | (c->kern_shut_wr ? LP_F_KERN_SHUT_WR : 0) |
           (c->kern_eof ? LP_F_KERN_EOF : 0) | (lp_rx_plain(c) ? LP_F_RX_PLAIN : 0) |
           lp_armed_bells(&c->ch);
}

/* One handed-over connection: its descriptors, channel memfd and state.
 * 0 when the connection is ours now, -1 when it stays plain. */
int lp_inherit_one(const int *fds, int nfds, int memfd, int side, unsigned flags,
                   const uint64_t v[4], const int xfds[2])
{
    struct stat st;
    lp_conn_t *c;
    int family = 0, fd = fds[0], i;

    if (fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
        zc_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &(socklen_t){ sizeof(int) })) {
        local_pair_fd_close(memfd);
        return -1;
    }
    c = lp_conn_new(LP_PAIRED);
    if (!c || local_ring_adopt(memfd, side, &c->ch)) {
        if (c)
            lp_conn_free(c);
        local_pair_fd_close(memfd);
        return -1;
    }
    lp_channel_keep(c, memfd);
    zc_real.fcntl(c->memfd, F_SETFD, FD_CLOEXEC);   /* (an exec'd image's came without) */
    lp_parts_adopted(c);
    lp_xchg_inherit(c, xfds);
    lp_side_publish(c, fd);
    lp_dir_set(c, LP_TX, flags & LP_F_TX_RING    ? LP_DIR_RING
                         : flags & LP_F_TX_NEVER ? LP_DIR_PLAIN
                                                 : LP_DIR_KERNEL);
    lp_dir_set(c, LP_RX, flags & LP_F_RX_RING    ? LP_DIR_RING
                         : flags & LP_F_RX_PLAIN ? LP_DIR_PLAIN
                                                 : LP_DIR_KERNEL);
    c->wr_shut = !!(flags & LP_F_WR_SHUT);
    c->rd_shut = !!(flags & LP_F_RD_SHUT);
    c->kern_shut_wr = !!(flags & LP_F_KERN_SHUT_WR);
    c->kern_eof = !!(flags & LP_F_KERN_EOF);
    lp_armed_take(&c->ch, flags);
    c->rv_seen = (uint8_t)lp_rv(c);
    c->ch.quiet = c->rv_seen;
    c->tx_kernel = v[0];
    c->rx_kernel = v[1];
    c->bells_drained = v[2];
    c->ch.bells_claimed = v[3];
    for (i = 0; i < nfds; i++) {
        if (i && (fstat(fds[i], &st) || !S_ISSOCK(st.st_mode)))
            continue;
        shim_fd_socket_track(fds[i], family, SOCK_STREAM);
        if (i)
            c->refs++;
        lp_claim(fds[i], c);
    }
    return 0;
}

/* --- SCM_RIGHTS hand-over (the mailbox itself is in scm.c) ----------------------- */

int path_local_handover_prepare(shim_fd_t *f, int fd, path_local_handover_t *h, int *memfd_p)
{
    lp_conn_t *c = lp_conn(f);
    socklen_t l = sizeof(h->cookie);

    if (c->state != LP_PAIRED || c->memfd < 0 ||
        zc_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, &h->cookie, &l))
        return -EINVAL;
    h->side = (uint32_t)c->ch.side;
    h->flags = lp_flags(c);
    h->tx_kernel = c->tx_kernel;
    h->rx_kernel = c->rx_kernel;
    h->bells_drained = c->bells_drained;
    h->bells_claimed = c->ch.bells_claimed;
    *memfd_p = c->memfd;
    return 0;
}

void path_local_hand_back(shim_fd_t *f, int fd, const char *why)
{
    lp_revert(lp_conn(f), fd, why);
}

void path_local_handover_posted(shim_fd_t *f)
{
    lp_holders_add(lp_conn(f), 1);
}

int path_local_handover_adopt(int fd, const path_local_handover_t *h, int memfd, int counted)
{
    uint64_t v[4] = { h->tx_kernel, h->rx_kernel, h->bells_drained, h->bells_claimed };
    shim_fd_t *f = shim_fd_get(fd);

    if (lp_claimed(f)) {    /* a number reused behind our back */
        shim_fd_t old = *f;

        shim_fd_claim_clear(f);
        old.path->ops->forget(&old, fd);    /* (lp_forget, through the path's table) */
    }
    if (lp_inherit_one(&fd, 1, memfd, (int)h->side, h->flags, v, (const int[2]){ -1, -1 }))
        return -1;
    if (counted)
        zc_stat_add(ZC_STAT_LOCAL_INHERITED, 1);
    return 0;
}
