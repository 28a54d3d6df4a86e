/* Pairing of same-host zcsock connections (protocol: local_pair.h).
 *
 * Sections: names and small socket helpers; sock_diag queries (inet_diag
 * exact lookups, unix_diag by inode); the connect side; the accept side; the
 * handover pickup; the shared control block. */
#include "local_pair.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "shim_path.h"
#include "shim_proc.h"
#include "zc_key.h"
#include "zc_real.h"
#include "zc_spin.h"
#include "zc_sys.h"

_Static_assert(sizeof(local_ring_hdr_t) <= LOCAL_PAIR_CTL_OFF,
               "pairing block overlaps the ring header");
_Static_assert(LOCAL_PAIR_CTL_OFF + sizeof(local_pair_ctl_t) <= LOCAL_RING_HDR_SIZE,
               "pairing block outside the header page");

#define LP_PREFIX      "zcsock/v1/"  /* public names (no key) */
#define LP_PREFIX_KEYED "zcsock/v2/" /* keyed names: of the same length */
#define LP_MSG_MAGIC   LOCAL_PAIR_OFFER_MAGIC
#define LP_PICKUP_MAX  4                      /* offers examined per call */
#define LP_ANN_BACKLOG 4
#define LP_TCP_NEW_SYN_RECV 12                /* request socket (kernel state) */

typedef local_pair_offer_t lp_offer_t;

/* What a sock_diag lookup tells about one socket. */
typedef struct lp_peer {
    uint64_t cookie;
    uint32_t uid;
    uint32_t ino;
    int state;
} lp_peer_t;

static const char *const lp_reason_names[LOCAL_PAIR_R_COUNT] = {
    [LOCAL_PAIR_R_NONE] = "none",
    [LOCAL_PAIR_R_NOT_ZCSOCK] = "not_zcsock",
    [LOCAL_PAIR_R_OTHER_USER] = "other_user",
    [LOCAL_PAIR_R_NOT_LOCAL] = "not_local",
    [LOCAL_PAIR_R_UNSUPPORTED] = "unsupported",
    [LOCAL_PAIR_R_DISABLED] = "disabled",
    [LOCAL_PAIR_R_ERROR] = "error",
    [LOCAL_PAIR_R_UNVERIFIED] = "unverified",
    [LOCAL_PAIR_R_CLOSED] = "closed",
    [LOCAL_PAIR_R_IO_URING] = "io_uring",
    [LOCAL_PAIR_R_CONNECT_FAILED] = "connect_failed",
    [LOCAL_PAIR_R_MAILBOX] = "mailbox",
    [LOCAL_PAIR_R_SQUATTED] = "squatted",
    [LOCAL_PAIR_R_SHORT] = "short",
    [LOCAL_PAIR_R_FD_LIMIT] = "fd_limit",
    [LOCAL_PAIR_R_LEARNED_SHORT] = "learned_short",
    [LOCAL_PAIR_R_MAP_LIMIT] = "map_limit",
};

const char *local_pair_reason_name(int reason)
{
    if (reason < 0 || reason >= LOCAL_PAIR_R_COUNT)
        return "unknown";
    return lp_reason_names[reason];
}

void local_pair_fd_close(int fd)
{
    if (fd >= 0)
        zc_real.close(fd);
}

/* --- names and small helpers --- */

/* The rendezvous name of cookie (kind 'L' a listener's beacon, 'C' a
 * client's announcement) into *sun; returns the address length.  With the
 * user's key (common/zc_key.h) "\0zcsock/v2/<kind>/<16 hex>" of a keyed
 * hash of kind and cookie, which no other user can know before it is bound;
 * without one the public "\0zcsock/v1/<kind>/<cookie in 16 hex>".  euid:
 * our effective user, read once by the pairing step that asks. */
static socklen_t lp_name(struct sockaddr_un *sun, char kind, uint64_t cookie, uint32_t euid)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t key[ZC_KEY_LEN], in[9];
    char *p = sun->sun_path;
    int keyed = zc_key_get_for(euid, key);

    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    *p++ = '\0';
    memcpy(p, keyed ? LP_PREFIX_KEYED : LP_PREFIX, sizeof(LP_PREFIX) - 1);
    p += sizeof(LP_PREFIX) - 1;
    *p++ = kind;
    *p++ = '/';
    if (keyed) {
        in[0] = (uint8_t)kind;
        for (int i = 0; i < 8; i++)
            in[1 + i] = (uint8_t)(cookie >> (8 * i));
        cookie = zc_siphash(key, in, sizeof(in));
        memset(key, 0, sizeof(key));
    }
    for (int i = 15; i >= 0; i--)
        *p++ = hex[(cookie >> (4 * i)) & 0xf];
    return (socklen_t)(p - (char *)sun);
}

static int lp_sockopt_int(int fd, int level, int opt, int *v)
{
    socklen_t l = sizeof(*v);

    if (zc_real.getsockopt(fd, level, opt, v, &l) < 0)
        return -errno;
    return 0;
}

static int lp_cookie(int fd, uint64_t *c)
{
    socklen_t l = sizeof(*c);

    if (zc_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, c, &l) < 0)
        return -errno;
    return 0;
}

/* fd's cookie: *known when the caller has it (nonzero), else asked once
 * and kept there. */
static int lp_cookie_of(int fd, uint64_t *known, uint64_t *c)
{
    if (!*known) {
        int rc = lp_cookie(fd, known);

        if (rc)
            return rc;
    }
    *c = *known;
    return 0;
}

static int lp_peer_cred(int s, struct ucred *cr)
{
    socklen_t l = sizeof(*cr);

    if (zc_real.getsockopt(s, SOL_SOCKET, SO_PEERCRED, cr, &l) < 0)
        return -errno;
    return 0;
}

/* Kind of socket: AF_INET/AF_INET6 for TCP stream, AF_UNIX for unix stream,
 * -ENOTSUP otherwise.  A socket the table saw made with its family's
 * default protocol is answered from the table (SHIM_FD_STREAM_TCP: a
 * pairing asked the kernel three times here up to six times over). */
static int lp_kind(int fd)
{
    const shim_fd_t *f = shim_fd_get(fd);
    int dom, type, proto = 0;

    if (f && __atomic_load_n(&f->kind, __ATOMIC_ACQUIRE) == SHIM_FD_SOCKET &&
        f->stream == SHIM_FD_STREAM_TCP &&
        (f->family == AF_UNIX || f->family == AF_INET || f->family == AF_INET6))
        return f->family;
    if (lp_sockopt_int(fd, SOL_SOCKET, SO_DOMAIN, &dom) ||
        lp_sockopt_int(fd, SOL_SOCKET, SO_TYPE, &type) || type != SOCK_STREAM)
        return -ENOTSUP;
    if (dom == AF_UNIX)
        return AF_UNIX;
    if ((dom != AF_INET && dom != AF_INET6) ||
        lp_sockopt_int(fd, SOL_SOCKET, SO_PROTOCOL, &proto) || proto != IPPROTO_TCP)
        return -ENOTSUP;
    return dom;
}

/* --- sock_diag --- */

/* One netlink socket per process, reused by every query: opening and
 * closing one costs ~15 us more than a query (measured 22 vs 7 us).  Taken
 * with a try-lock (a thread finding it busy uses a temporary socket),
 * reopened after fork (pid changed) and whenever the descriptor no longer is
 * the socket we opened (the application closed the number and reused it:
 * inode check).  local_pair_fd_is_internal() lets the close hooks refuse it.
 * It sits above the library's descriptor floor and stays for the process's
 * life once opened (local_pair_idle). */
static struct {
    int fd;
    int pid;
    uint64_t ino;
    uint32_t seq;
    int busy;
} lp_nl = { .fd = -1 };

static int lp_nl_open(void)
{
    return zc_real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
}

/* The cached socket (lock held on return >= 0 with *cached = 1), or a
 * temporary one (*cached = 0). */
static int lp_nl_get(int *cached)
{
    struct stat st;
    int pid = zc_getpid(), s;

    *cached = 0;
    if (__atomic_exchange_n(&lp_nl.busy, 1, __ATOMIC_ACQUIRE))
        return lp_nl_open();
    if (lp_nl.fd >= 0 && lp_nl.pid == pid && fstat(lp_nl.fd, &st) == 0 &&
        (uint64_t)st.st_ino == lp_nl.ino) {
        *cached = 1;
        return lp_nl.fd;
    }
    /* Not ours any more (fork: the parent's copy stays, unused, in the
     * child; reuse: the number belongs to the application now). */
    s = shim_fd_internal_raise(lp_nl_open());
    if (s < 0 || fstat(s, &st) < 0) {
        __atomic_store_n(&lp_nl.busy, 0, __ATOMIC_RELEASE);
        return s < 0 ? s : (zc_real.close(s), -1);
    }
    lp_nl.fd = s;
    lp_nl.pid = pid;
    lp_nl.ino = (uint64_t)st.st_ino;
    *cached = 1;
    return s;
}

static void lp_nl_put(int s, int cached)
{
    if (cached)
        __atomic_store_n(&lp_nl.busy, 0, __ATOMIC_RELEASE);
    else if (s >= 0)
        zc_real.close(s);
}

void local_pair_idle(void)
{
    struct stat st;

    if (__atomic_exchange_n(&lp_nl.busy, 1, __ATOMIC_ACQUIRE))
        return;     /* in use: a query is under way, its pairing is not over */
    /* ours stays for the process's life (reopening it for every connection
     * of a process that opens them one after the other cost four system
     * calls each, issue 31); a fork child's copy of its parent's goes */
    if (lp_nl.fd >= 0 && lp_nl.pid != zc_getpid()) {
        if (fstat(lp_nl.fd, &st) == 0 && (uint64_t)st.st_ino == lp_nl.ino)
            zc_real.close(lp_nl.fd);
        lp_nl.fd = -1;
        lp_nl.pid = 0;
    }
    __atomic_store_n(&lp_nl.busy, 0, __ATOMIC_RELEASE);
}

int local_pair_fd_is_internal(int fd)
{
    return fd >= 0 && fd == __atomic_load_n(&lp_nl.fd, __ATOMIC_RELAXED) &&
           lp_nl.pid == zc_getpid();
}

static int lp_diag_query(void *req, size_t len, uint8_t *buf, size_t bufsz)
{
    struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
    const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
    struct nlmsghdr *q = req;
    int s, cached, rc = -EPROTO;
    ssize_t n;

    s = lp_nl_get(&cached);
    if (s < 0)
        return -EMFILE;
    q->nlmsg_seq = ++lp_nl.seq;
    if (zc_real.sendto(s, req, len, 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
        rc = -errno;
        goto out;
    }
    /* The kernel answers inside sendto; skip any stale answer (a query of
     * a thread that used a temporary socket never lands here). */
    for (int i = 0; i < 4; i++) {
        n = zc_real.recv(s, buf, bufsz, MSG_DONTWAIT);
        if (n < 0) {
            rc = -errno;
            goto out;
        }
        if (!NLMSG_OK(h, (size_t)n)) {
            rc = -EPROTO;
            goto out;
        }
        if (h->nlmsg_seq == q->nlmsg_seq)
            break;
    }
    rc = -EPROTO;
    if (h->nlmsg_seq != q->nlmsg_seq)
        goto out;
    if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA(h);
        rc = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error ? e->error : -EPROTO;
        goto out;
    }
    if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY)
        rc = (int)h->nlmsg_len;
out:
    lp_nl_put(s, cached);
    return rc;
}

/* A sockaddr as inet_diag wants it: family, port, 16 address bytes.  A
 * v4-mapped IPv6 address becomes IPv4 (the kernel only maps when both ends
 * of an AF_INET6 request are mapped). */
typedef struct lp_ep {
    int family;
    uint16_t port;      /* network order */
    uint32_t addr[4];
} lp_ep_t;

static int lp_ep_from(const struct sockaddr *sa, socklen_t len, lp_ep_t *ep)
{
    memset(ep, 0, sizeof(*ep));
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *s4 = (const void *)sa;
        ep->family = AF_INET;
        ep->port = s4->sin_port;
        memcpy(ep->addr, &s4->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        ep->port = s6->sin6_port;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            ep->family = AF_INET;
            memcpy(ep->addr, &s6->sin6_addr.s6_addr[12], 4);
        } else {
            ep->family = AF_INET6;
            memcpy(ep->addr, &s6->sin6_addr, 16);
        }
        return 0;
    }
    return -EAFNOSUPPORT;
}

/* Exact inet_diag lookup of the TCP socket whose local end is src and remote
 * end dst (dst all zero: the listener on src).  -ENOENT when none. */
static int lp_inet_lookup(const lp_ep_t *src, const lp_ep_t *dst, lp_peer_t *p)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req;
    uint8_t buf[512] __attribute__((aligned(8)));
    const struct inet_diag_msg *m;
    int rc;

    memset(&req, 0, sizeof(req));
    req.nlh.nlmsg_len = sizeof(req);
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = (uint8_t)src->family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = src->port;
    req.r.id.idiag_dport = dst->port;
    memcpy(req.r.id.idiag_src, src->addr, sizeof(src->addr));
    memcpy(req.r.id.idiag_dst, dst->addr, sizeof(dst->addr));
    req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    rc = lp_diag_query(&req, sizeof(req), buf, sizeof(buf));
    if (rc < 0)
        return rc;
    if ((size_t)rc < NLMSG_LENGTH(sizeof(*m)))
        return -EPROTO;
    m = NLMSG_DATA((struct nlmsghdr *)buf);
    p->cookie = (uint64_t)m->id.idiag_cookie[0] | (uint64_t)m->id.idiag_cookie[1] << 32;
    p->uid = m->idiag_uid;
    p->ino = m->idiag_inode;
    p->state = m->idiag_state;
    return 0;
}

/* The peer socket of connected TCP socket fd (the other end's local address
 * is our remote one); its remote address (getpeername) in b when the caller
 * has it (lb > 0), else asked. */
static int lp_inet_peer_at(int fd, const struct sockaddr *b, socklen_t lb, lp_peer_t *p)
{
    struct sockaddr_storage a, bb;
    socklen_t la = sizeof(a);
    lp_ep_t self, peer;

    if (getsockname(fd, (struct sockaddr *)&a, &la) < 0)
        return -errno;
    if (!b || !lb) {
        lb = sizeof(bb);
        b = (struct sockaddr *)&bb;
        if (getpeername(fd, (struct sockaddr *)&bb, &lb) < 0)
            return -errno;
    }
    if (lp_ep_from((struct sockaddr *)&a, la, &self) ||
        lp_ep_from(b, lb, &peer) || self.family != peer.family)
        return -EAFNOSUPPORT;
    return lp_inet_lookup(&peer, &self, p);
}

static int lp_inet_peer(int fd, lp_peer_t *p)
{
    return lp_inet_peer_at(fd, NULL, 0, p);
}

/* A loopback address (127.0.0.0/8, ::1, a v4-mapped 127.0.0.0/8): whatever
 * holds the other end of a connection to it lives in this namespace. */
static int lp_ep_loopback(const lp_ep_t *ep)
{
    static const uint8_t one6[16] = { [15] = 1 };

    if (ep->family == AF_INET)
        return ((const uint8_t *)ep->addr)[0] == 127;
    return ep->family == AF_INET6 && !memcmp(ep->addr, one6, sizeof(one6));
}

/* unix_diag of socket inode ino: its cookie and uid, and with want_peer its
 * peer's inode in p->ino (else p->ino = ino). */
static int lp_unix_lookup(uint32_t ino, int want_peer, lp_peer_t *p)
{
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req r;
    } req;
    uint8_t buf[512] __attribute__((aligned(8)));
    const struct unix_diag_msg *m;
    const struct rtattr *a;
    int rc, left, got = 0;

    memset(&req, 0, sizeof(req));
    req.nlh.nlmsg_len = sizeof(req);
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = AF_UNIX;
    req.r.udiag_states = ~0u;
    req.r.udiag_ino = ino;
    req.r.udiag_show = want_peer ? UDIAG_SHOW_PEER : UDIAG_SHOW_UID;
    req.r.udiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.udiag_cookie[1] = INET_DIAG_NOCOOKIE;
    rc = lp_diag_query(&req, sizeof(req), buf, sizeof(buf));
    if (rc < 0)
        return rc;
    if ((size_t)rc < NLMSG_LENGTH(sizeof(*m)))
        return -EPROTO;
    m = NLMSG_DATA((struct nlmsghdr *)buf);
    p->cookie = (uint64_t)m->udiag_cookie[0] | (uint64_t)m->udiag_cookie[1] << 32;
    p->ino = m->udiag_ino;
    p->state = m->udiag_state;
    left = rc - (int)NLMSG_LENGTH(sizeof(*m));
    a = (const struct rtattr *)((const uint8_t *)m + NLMSG_ALIGN(sizeof(*m)));
    for (; RTA_OK(a, left); a = RTA_NEXT(a, left)) {
        if (RTA_PAYLOAD(a) < 4)
            continue;
        if (want_peer && a->rta_type == UNIX_DIAG_PEER) {
            memcpy(&p->ino, RTA_DATA(a), 4);
            got = 1;
        } else if (!want_peer && a->rta_type == UNIX_DIAG_UID) {
            memcpy(&p->uid, RTA_DATA(a), 4);
            got = 1;
        }
    }
    return got ? 0 : -ENOENT;
}

int local_pair_unix_peer_ino(int fd, uint64_t *ino)
{
    struct stat st;
    lp_peer_t p;
    int rc;

    if (fstat(fd, &st) < 0)
        return -errno;
    rc = lp_unix_lookup((uint32_t)st.st_ino, 1, &p);
    if (!rc)
        *ino = p.ino;
    return rc;
}

/* The peer socket of connected unix stream socket fd. */
static int lp_unix_peer(int fd, lp_peer_t *p)
{
    struct stat st;
    int rc;

    if (fstat(fd, &st) < 0)
        return -errno;
    rc = lp_unix_lookup((uint32_t)st.st_ino, 1, p);
    if (rc)
        return rc;
    return lp_unix_lookup(p->ino, 0, p);
}

static int lp_peer_of(int kind, int fd, lp_peer_t *p)
{
    return kind == AF_UNIX ? lp_unix_peer(fd, p) : lp_inet_peer(fd, p);
}

/* --- listen / connect side --- */

int local_pair_listen(int fd, int *beacon_p)
{
    struct sockaddr_un sun;
    socklen_t len;
    uint64_t cookie;
    int kind = lp_kind(fd), acc = 0, s, rc;

    *beacon_p = -1;
    if (kind != AF_INET && kind != AF_INET6)
        return -ENOTSUP;
    if (lp_sockopt_int(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc) || !acc)
        return -ENOTSUP;
    rc = lp_cookie(fd, &cookie);
    if (rc)
        return rc;
    len = lp_name(&sun, 'L', cookie, (uint32_t)geteuid());
    s = zc_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -errno;
    if (zc_real.bind(s, (struct sockaddr *)&sun, len) < 0) {
        rc = errno == EADDRINUSE ? 0 : -errno;
        zc_real.close(s);
        return rc;
    }
    *beacon_p = s;
    return 0;
}

/* Listener cookies whose beacon was seen (direct-mapped, lock-free).  A
 * stale entry only costs an unneeded announcement (the server decides);
 * cookies are never reused, so an entry can never stand for another
 * listener.  Absence is never cached. */
#define LP_BEACON_CACHE 64
static uint64_t lp_beacon_seen[LP_BEACON_CACHE];

/* Is there a beacon for listener cookie c?  1 yes, 0 no, -errno. */
static int lp_beacon_probe(uint64_t c, uint32_t euid)
{
    uint64_t *slot = &lp_beacon_seen[c % LP_BEACON_CACHE];
    struct sockaddr_un sun;
    socklen_t len;
    int s, rc;

    if (c && __atomic_load_n(slot, __ATOMIC_RELAXED) == c)
        return 1;
    len = lp_name(&sun, 'L', c, euid);
    s = zc_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    rc = zc_real.connect(s, (struct sockaddr *)&sun, len) == 0 ? 1
         : (errno == ECONNREFUSED || errno == ENOENT) ? 0 : -errno;
    zc_real.close(s);
    if (rc == 1)
        __atomic_store_n(slot, c, __ATOMIC_RELAXED);
    return rc;
}

/* Destinations not worth asking about again (local_pair.h,
 * local_pair_dest_known): direct-mapped, each slot a seqlock whose writer
 * only ever tries (a slot being written is a miss, and a write that finds
 * the slot busy is dropped: a cache). */
#define LP_DEST_SLOTS 64
typedef struct lp_dest {
    uint32_t seq;           /* odd while written */
    int32_t reason;
    int64_t until_us;
    int32_t family;
    uint32_t port;
    uint32_t addr[4];
} lp_dest_t;
static lp_dest_t lp_dests[LP_DEST_SLOTS];

static lp_dest_t *lp_dest_slot(const lp_ep_t *ep)
{
    uint32_t h = (uint32_t)ep->family * 0x9e3779b1u ^ ep->port;

    for (int i = 0; i < 4; i++)
        h = (h ^ ep->addr[i]) * 0x85ebca6bu;
    return &lp_dests[(h ^ h >> 16) % LP_DEST_SLOTS];
}

int local_pair_dest_known(const struct sockaddr *addr, socklen_t len, int *reason_p)
{
    lp_ep_t ep;
    lp_dest_t *d;
    uint32_t seq;
    int32_t reason;
    int hit = 1;

    if (lp_ep_from(addr, len, &ep))
        return 0;
    d = lp_dest_slot(&ep);
    seq = __atomic_load_n(&d->seq, __ATOMIC_ACQUIRE);
    if (seq & 1)
        return 0;
    /* (acquire loads: the second look at seq cannot come before them) */
    hit = __atomic_load_n(&d->family, __ATOMIC_ACQUIRE) == ep.family &&
          __atomic_load_n(&d->port, __ATOMIC_ACQUIRE) == ep.port &&
          __atomic_load_n(&d->until_us, __ATOMIC_ACQUIRE) > zc_now_us();
    for (int i = 0; i < 4 && hit; i++)
        hit = __atomic_load_n(&d->addr[i], __ATOMIC_ACQUIRE) == ep.addr[i];
    reason = __atomic_load_n(&d->reason, __ATOMIC_ACQUIRE);
    if (!hit || __atomic_load_n(&d->seq, __ATOMIC_RELAXED) != seq)
        return 0;
    *reason_p = reason;
    return 1;
}

void local_pair_dest_note(const struct sockaddr *addr, socklen_t len, int reason)
{
    lp_ep_t ep;
    lp_dest_t *d;
    uint32_t seq;

    if ((reason != LOCAL_PAIR_R_NOT_LOCAL && reason != LOCAL_PAIR_R_OTHER_USER &&
         reason != LOCAL_PAIR_R_NOT_ZCSOCK) || lp_ep_from(addr, len, &ep))
        return;
    d = lp_dest_slot(&ep);
    seq = __atomic_load_n(&d->seq, __ATOMIC_RELAXED);
    if ((seq & 1) || !__atomic_compare_exchange_n(&d->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE,
                                                  __ATOMIC_RELAXED))
        return;
    /* (release stores: a reader that sees a field sees seq odd first) */
    __atomic_store_n(&d->family, ep.family, __ATOMIC_RELEASE);
    __atomic_store_n(&d->port, ep.port, __ATOMIC_RELEASE);
    for (int i = 0; i < 4; i++)
        __atomic_store_n(&d->addr[i], ep.addr[i], __ATOMIC_RELEASE);
    __atomic_store_n(&d->reason, reason, __ATOMIC_RELEASE);
    __atomic_store_n(&d->until_us, zc_now_us() + LOCAL_PAIR_DEST_MS * 1000, __ATOMIC_RELEASE);
    __atomic_store_n(&d->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Bind and listen on the announcement of socket fd (cookie: lp_cookie_of). */
static int lp_announce(int fd, uint64_t *known, uint32_t euid, int *ann_p)
{
    struct sockaddr_un sun;
    socklen_t len;
    uint64_t cookie;
    int s, rc;

    rc = lp_cookie_of(fd, known, &cookie);
    if (rc)
        return rc;
    len = lp_name(&sun, 'C', cookie, euid);
    s = zc_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -errno;
    if (zc_real.bind(s, (struct sockaddr *)&sun, len) < 0 ||
        zc_real.listen(s, LP_ANN_BACKLOG) < 0) {
        rc = -errno;
        zc_real.close(s);
        return rc;
    }
    *ann_p = s;
    return 0;
}

static int lp_decline(int *reason_p, int reason)
{
    *reason_p = reason;
    return LOCAL_PAIR_DECLINED;
}

int local_pair_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len,
                               uint64_t *cookie, int *ann_p, int *reason_p)
{
    uint32_t euid = (uint32_t)geteuid();
    lp_ep_t dst, any;
    lp_peer_t l;
    int kind, rc;

    *ann_p = -1;
    *reason_p = LOCAL_PAIR_R_NONE;
    kind = lp_kind(fd);
    if (kind < 0 || !addr || (kind == AF_UNIX) != (addr->sa_family == AF_UNIX))
        return lp_decline(reason_p, LOCAL_PAIR_R_UNSUPPORTED);
    if (kind != AF_UNIX) {
        if (lp_ep_from(addr, len, &dst))
            return lp_decline(reason_p, LOCAL_PAIR_R_UNSUPPORTED);
        memset(&any, 0, sizeof(any));
        any.family = dst.family;
        rc = lp_inet_lookup(&dst, &any, &l);
        if (rc == -ENOENT || (rc == 0 && l.state != TCP_LISTEN))
            return lp_decline(reason_p, LOCAL_PAIR_R_NOT_LOCAL);
        if (rc)
            return lp_decline(reason_p, LOCAL_PAIR_R_ERROR);
        if (l.uid != euid)
            return lp_decline(reason_p, LOCAL_PAIR_R_OTHER_USER);
        rc = lp_beacon_probe(l.cookie, euid);
        if (rc <= 0)
            return lp_decline(reason_p, rc == 0 ? LOCAL_PAIR_R_NOT_ZCSOCK : LOCAL_PAIR_R_ERROR);
    }
    rc = lp_announce(fd, cookie, euid, ann_p);
    if (rc)     /* a name taken: cookies are never reused, so it is a squatter's */
        return lp_decline(reason_p, rc == -EADDRINUSE ? LOCAL_PAIR_R_SQUATTED
                                                      : LOCAL_PAIR_R_ERROR);
    return LOCAL_PAIR_PENDING;
}

int local_pair_connected(int fd, int ann, const struct sockaddr *peer, socklen_t peer_len,
                         int *reason_p)
{
    struct sockaddr_storage a;
    socklen_t al = sizeof(a);
    lp_ep_t ep;
    lp_peer_t p;
    int kind = lp_kind(fd), rc;

    *reason_p = LOCAL_PAIR_R_NONE;
    if (ann < 0 || kind < 0)
        return lp_decline(reason_p, LOCAL_PAIR_R_UNSUPPORTED);
    /* connected?  (not SO_ERROR: that would take an error from the app);
     * a caller that just read the peer's address knows */
    if (!peer || !peer_len) {
        if (getpeername(fd, (struct sockaddr *)&a, &al) < 0)
            return lp_decline(reason_p, LOCAL_PAIR_R_ERROR);
        peer = (struct sockaddr *)&a;
        peer_len = al;
    }
    if (kind == AF_UNIX)
        return LOCAL_PAIR_PENDING;
    /* A loopback destination's server end is in this namespace: only the
     * lookup below's other findings (a SYN-cookie handshake, NAT) would
     * decline it early, and the server checks everything anyway (five
     * system calls a pairing, issue 31). */
    if (!lp_ep_from(peer, peer_len, &ep) && lp_ep_loopback(&ep))
        return LOCAL_PAIR_PENDING;
    /* The server end must be in this namespace: once our connect completed
     * it exists as a request socket or as the accepted child.  The lookup
     * falling back to a listener (a wildcard listener that happens to use
     * the port of a remote destination) means "not local"; so does a
     * SYN-cookie handshake, whose child may not exist yet (a missed pairing,
     * never a wrong one: the server then finds no announcement). */
    rc = lp_inet_peer_at(fd, peer, peer_len, &p);
    if (rc == -ENOENT || (rc == 0 && p.state == TCP_LISTEN))
        return lp_decline(reason_p, LOCAL_PAIR_R_NOT_LOCAL);
    if (rc)
        return lp_decline(reason_p, LOCAL_PAIR_R_ERROR);
    return LOCAL_PAIR_PENDING;
}

/* --- accept side --- */

static void lp_ctl_init(local_ring_t *ch, uint64_t server_cookie, uint64_t client_cookie)
{
    local_pair_ctl_t *c = (local_pair_ctl_t *)(ch->base + LOCAL_PAIR_CTL_OFF);

    c->server_cookie = server_cookie;
    c->client_cookie = client_cookie;
    c->switch_at[LOCAL_RING_AB] = LOCAL_PAIR_SWITCH_UNSET;
    c->switch_at[LOCAL_RING_BA] = LOCAL_PAIR_SWITCH_UNSET;
    /* S3: the first ring write of each direction rings a doorbell. */
    __atomic_store_n(&ch->hdr->ctl[LOCAL_RING_AB].cons_waiting, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&ch->hdr->ctl[LOCAL_RING_BA].cons_waiting, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&c->magic, LOCAL_PAIR_CTL_MAGIC, __ATOMIC_RELEASE);
}

/* Send the offer {o} + memfd (+ sock, a re-queue's proof, when >= 0) on
 * connected announcement socket s. */
static int lp_offer_send(int s, const lp_offer_t *o, int memfd, int sock)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } cm;
    int fds[2] = { memfd, sock }, nfd = sock >= 0 ? 2 : 1;
    struct iovec iov = { (void *)o, sizeof(*o) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                         .msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int)) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

    memset(&cm, 0, sizeof(cm));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfd * sizeof(int));
    if (zc_real.sendmsg(s, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(*o))
        return errno ? -errno : -EIO;
    return 0;
}

/* Does the announcer (pid), or a child it forked, hold socket inode ino?
 * A process that connects, forks and hands the connection to the child
 * announced before the fork; the child shares the announcement. */
static int lp_announcer_holds(int pid, uint64_t ino)
{
    int kids[32], n, i;

    if (shim_proc_holds_socket(pid, ino))
        return 1;
    n = shim_proc_children_of(pid, kids, 32);
    for (i = 0; i < n; i++)
        if (shim_proc_holds_socket(kids[i], ino))
            return 1;
    return 0;
}

/* Connect to the announcement of client cookie c; checks its owner: our
 * user, and with ino != 0 a process that holds socket inode ino, or a child
 * of it that does (the name is public and could be bound first by anyone
 * of the same user). */
static int lp_ann_connect(uint64_t c, uint32_t ino, uint32_t euid, int *s_p, int *reason_p)
{
    struct sockaddr_un sun;
    socklen_t len = lp_name(&sun, 'C', c, euid);
    struct ucred cr;
    int s;

    s = zc_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
        *reason_p = LOCAL_PAIR_R_ERROR;
        return -errno;
    }
    if (zc_real.connect(s, (struct sockaddr *)&sun, len) < 0) {
        *reason_p = (errno == ECONNREFUSED || errno == ENOENT) ? LOCAL_PAIR_R_NOT_ZCSOCK
                                                             : LOCAL_PAIR_R_ERROR;
        zc_real.close(s);
        return -1;
    }
    if (lp_peer_cred(s, &cr) || cr.uid != euid) {
        *reason_p = LOCAL_PAIR_R_OTHER_USER;
        zc_real.close(s);
        return -1;
    }
    if (ino && (cr.pid <= 0 || !lp_announcer_holds(cr.pid, ino))) {
        *reason_p = LOCAL_PAIR_R_UNVERIFIED;
        zc_real.close(s);
        return -1;
    }
    *s_p = s;
    return 0;
}

int local_pair_accepted(int listen_fd, int fd, uint64_t *cookie, size_t ring_size,
                        local_ring_t *ch, int *memfd_p, int *reason_p)
{
    lp_offer_t o = { .magic = LP_MSG_MAGIC };
    uint32_t euid = (uint32_t)geteuid();
    lp_peer_t p;
    int kind, s = -1, memfd, rc;

    (void)listen_fd;
    *memfd_p = -1;
    *reason_p = LOCAL_PAIR_R_NONE;
    kind = lp_kind(fd);
    if (kind < 0)
        return lp_decline(reason_p, LOCAL_PAIR_R_UNSUPPORTED);
    rc = lp_peer_of(kind, fd, &p);
    if (rc == -ENOENT || (rc == 0 && kind != AF_UNIX &&
                          (p.state == TCP_LISTEN || p.state == TCP_SYN_RECV ||
                           p.state == LP_TCP_NEW_SYN_RECV)))
        return lp_decline(reason_p, LOCAL_PAIR_R_NOT_LOCAL);
    if (rc)
        return lp_decline(reason_p, LOCAL_PAIR_R_ERROR);
    if (p.uid != euid)
        return lp_decline(reason_p, LOCAL_PAIR_R_OTHER_USER);
    o.client_cookie = p.cookie;
    if (lp_cookie_of(fd, cookie, &o.server_cookie))
        return lp_decline(reason_p, LOCAL_PAIR_R_ERROR);
    if (!p.ino)     /* no file holds the client's socket: it closed already */
        return lp_decline(reason_p, LOCAL_PAIR_R_CLOSED);
    if (lp_ann_connect(p.cookie, p.ino, euid, &s, reason_p))
        return LOCAL_PAIR_DECLINED;
    memfd = local_ring_create(ring_size, ch);
    if (memfd < 0) {
        zc_real.close(s);
        return lp_decline(reason_p, memfd == -ENOMEM ? LOCAL_PAIR_R_MAP_LIMIT : LOCAL_PAIR_R_ERROR);
    }
    lp_ctl_init(ch, o.server_cookie, o.client_cookie);
    o.fd_hint = (uint64_t)fd;
    rc = lp_offer_send(s, &o, memfd, -1);
    zc_real.close(s);
    if (rc == 0) {
        *memfd_p = memfd;
        return LOCAL_PAIR_PAIRED;
    }
    local_ring_close(ch, 1);
    zc_real.close(memfd);
    return lp_decline(reason_p, LOCAL_PAIR_R_ERROR);
}


/* --- pickup (client) --- */

/* Receive one offer from accepted announcement connection c: the message
 * and exactly one descriptor (a re-queue: two, the second our socket). */
static int lp_offer_recv(int c, lp_offer_t *o, int *memfd_p, int *sock_p)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } cm;
    struct iovec iov = { o, sizeof(*o) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
    struct cmsghdr *h;
    int fds[4], nfd = 0;
    ssize_t n;

    n = zc_real.recvmsg(c, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -ECONNRESET;
    for (h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfd < 4; i++)
            memcpy(&fds[nfd++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
    }
    if (n != (ssize_t)sizeof(*o) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        o->magic != LP_MSG_MAGIC ||
        nfd != ((o->fd_hint & LOCAL_PAIR_HINT_REQUEUE) ? 2 : 1)) {
        for (int i = 0; i < nfd; i++)
            zc_real.close(fds[i]);
        return -EPROTO;
    }
    *memfd_p = fds[0];
    *sock_p = nfd == 2 ? fds[1] : -1;
    return 0;
}

/* Re-queue offer o for the other holders of our announcement
 * (LOCAL_PAIR_F_REQUEUE): a new connection to our own name, carrying the
 * same offer, waits in the listener every forked holder shares.  The name
 * is gone only when no other holder is left: nothing to do then.  While we
 * hold the listener (own_listener) the name is ours; otherwise its owner
 * must prove it holds our socket, as the server checks. */
static int lp_requeue(int fd, uint64_t client_cookie, const lp_offer_t *o, int memfd,
                      int own_listener)
{
    lp_offer_t q = *o;
    struct stat st;
    int s, reason, rc;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (lp_ann_connect(client_cookie, own_listener ? 0 : (uint32_t)st.st_ino,
                       (uint32_t)geteuid(), &s, &reason))
        return reason == LOCAL_PAIR_R_NOT_ZCSOCK ? 0 : -EPERM;
    /* A fellow holder re-queues it, with our socket as proof: that one does
     * not depend on the re-queuer (or the server) still being alive when the
     * others look, and once one holder attached, every other must too. */
    q.fd_hint = LOCAL_PAIR_HINT_REQUEUE;
    rc = lp_offer_send(s, &q, memfd, fd);
    zc_real.close(s);
    return rc;
}

/* The sender of the offer on connection c must hold the socket at the
 * other end of fd (whose cookie the offer names) under fd_hint; a re-queue
 * carries our own socket instead (sock), whose cookie must be ours.  A
 * same-user impostor that forges an offer has every cookie right, but not
 * the descriptor.  The server does not pass its socket: the offer would keep
 * it open while it waits (a close would then not reset or end the
 * connection); a re-queue may pass ours, whose listener closes with the
 * last holder. */
static int lp_offer_proved(int fd, int c, int sock, const lp_offer_t *o, uint64_t mine,
                           int pid)
{
    struct ucred cr = { .pid = pid };
    lp_peer_t p;
    uint64_t theirs;
    int kind = lp_kind(fd);

    if (kind < 0)
        return -EPERM;
    if (o->fd_hint & LOCAL_PAIR_HINT_REQUEUE)
        return sock >= 0 && !lp_cookie(sock, &theirs) && theirs == mine ? 0 : -EPERM;
    if ((!pid && lp_peer_cred(c, &cr)) || cr.pid <= 0 || o->fd_hint > INT32_MAX)
        return -EPERM;
    if (lp_peer_of(kind, fd, &p))
        return -EPERM;
    if (!p.ino)         /* no file holds the server's socket any more */
        return -ECONNABORTED;
    if (p.cookie != o->server_cookie)
        return -EPERM;
    return shim_proc_fd_is_socket(cr.pid, (int)o->fd_hint, p.ino) == 1 ? 0 : -EPERM;
}

/* lp_offer_proved, and a proof that failed on a connection whose peer has
 * ended its side already (its FIN or close is in our socket) is the
 * connection's end, not a doubt about the offer: -ECONNABORTED (declined
 * "closed", which a retry would meet too).  A server that answered one
 * request and closed no longer holds the descriptor it named, may have
 * given its number to the next connection, and leaves its socket to
 * TIME_WAIT, so the proof then fails in any of its steps.  A forger that
 * exited leaves the connection alive: -EPERM. */
static int lp_offer_proof(int fd, int c, int sock, const lp_offer_t *o, uint64_t mine, int pid)
{
    struct pollfd pfd = { fd, POLLRDHUP, 0 };
    int rc = lp_offer_proved(fd, c, sock, o, mine, pid), kind;
    lp_peer_t p;

    if (rc != -EPERM)
        return rc;
    if (zc_real.poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP)))
        return -ECONNABORTED;
    /* The server may have closed between the proof's look at its socket
     * and the one at its descriptor (its number already another
     * connection's), its FIN not yet in ours: its socket, looked at again,
     * is held by no file or no longer established. */
    kind = lp_kind(fd);
    if (kind > 0 && !lp_peer_of(kind, fd, &p) && p.cookie == o->server_cookie &&
        (!p.ino || (kind != AF_UNIX && p.state != TCP_ESTABLISHED)))
        return -ECONNABORTED;
    return rc;
}

/* Receive, validate and attach the offer on connection c (accepted from the
 * announcement, or ann itself once it became a connection; pid: c's peer
 * process when the caller asked already, else 0).  -EAGAIN: the
 * server connected but has not sent yet; -ECONNRESET: it closed without an
 * offer (none will come); -EPROTO: invalid offer (discarded). */
static int lp_offer_take(int fd, int c, int pid, int flags, int own_listener, uint64_t *cookie,
                         local_ring_t *ch, int *memfd_p)
{
    const local_pair_ctl_t *ctl;
    lp_offer_t o;
    uint64_t mine;
    int memfd = -1, sock = -1, rc;

    rc = lp_offer_recv(c, &o, &memfd, &sock);
    if (rc)
        return rc;
    rc = -EPROTO;
    if (lp_cookie_of(fd, cookie, &mine) || o.client_cookie != mine)
        goto err;
    rc = lp_offer_proof(fd, c, sock, &o, mine, pid);
    if (sock >= 0)
        zc_real.close(sock);
    if (rc)
        goto err;
    rc = local_ring_attach(memfd, ch);
    if (rc)
        goto err;
    ctl = (const local_pair_ctl_t *)(ch->base + LOCAL_PAIR_CTL_OFF);
    if (__atomic_load_n(&ctl->magic, __ATOMIC_ACQUIRE) != LOCAL_PAIR_CTL_MAGIC ||
        ctl->server_cookie != o.server_cookie || ctl->client_cookie != mine) {
        local_ring_close(ch, 0);
        rc = -EPROTO;
        goto err;
    }
    /* Attached: the other holders get it too.  Its failure does not undo
     * ours (the server may already have switched to the ring for us). */
    if (flags & LOCAL_PAIR_F_REQUEUE)
        lp_requeue(fd, mine, &o, memfd, own_listener);
    *memfd_p = memfd;
    return 0;
err:
    zc_real.close(memfd);
    return rc;
}

int local_pair_channel_recv(int fd, int ann, int flags, uint64_t *cookie, local_ring_t *ch,
                            int *memfd_p)
{
    struct ucred cr;
    int acc = 0, rc = -EAGAIN;

    *memfd_p = -1;
    if (lp_kind(fd) < 0 || ann < 0 || lp_sockopt_int(ann, SOL_SOCKET, SO_ACCEPTCONN, &acc))
        return -EINVAL;
    if (!acc)                           /* ann is the server's connection now */
        return lp_offer_take(fd, ann, 0, flags, 0, cookie, ch, memfd_p);
    for (int i = 0; i < LP_PICKUP_MAX; i++) {
        int c = zc_real.accept4(ann, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (c < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? rc : -errno;
        if (lp_peer_cred(c, &cr) || cr.uid != geteuid()) {
            rc = -EPERM;
        } else {
            rc = lp_offer_take(fd, c, cr.pid, flags, 1, cookie, ch, memfd_p);
            if (rc == -EAGAIN) {
                /* Connected, offer still on its way: this connection takes
                 * the listener's place (only its offer can be valid now). */
                rc = zc_real.dup3(c, ann, O_CLOEXEC) < 0 ? -errno : -EAGAIN;
                zc_real.close(c);
                return rc;
            }
        }
        zc_real.close(c);
        if (rc == 0)
            return 0;
    }
    return rc;
}

/* --- shared control block --- */

local_pair_ctl_t *local_pair_ctl(local_ring_t *ch)
{
    local_pair_ctl_t *c;

    if (!ch || !ch->base)
        return NULL;
    c = (local_pair_ctl_t *)(ch->base + LOCAL_PAIR_CTL_OFF);
    if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != LOCAL_PAIR_CTL_MAGIC)
        return NULL;
    return c;
}

int local_pair_peer_attached(local_ring_t *ch)
{
    return local_ring_peer_state(ch) == LOCAL_RING_PEER_ATTACHED;
}

int local_pair_switch_publish(local_ring_t *ch, int dir, uint64_t sent)
{
    local_pair_ctl_t *c = local_pair_ctl(ch);
    uint64_t unset = LOCAL_PAIR_SWITCH_UNSET;

    if (!c || (dir != LOCAL_RING_AB && dir != LOCAL_RING_BA) || sent == unset)
        return -EINVAL;
    if (!__atomic_compare_exchange_n(&c->switch_at[dir], &unset, sent, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_ACQUIRE))
        return -EALREADY;
    return 0;
}

int local_pair_switch_refuse(local_ring_t *ch, int dir)
{
    local_pair_ctl_t *c = local_pair_ctl(ch);
    uint64_t unset = LOCAL_PAIR_SWITCH_UNSET;

    if (!c || (dir != LOCAL_RING_AB && dir != LOCAL_RING_BA))
        return -EINVAL;
    if (__atomic_compare_exchange_n(&c->switch_at[dir], &unset, LOCAL_PAIR_SWITCH_NEVER, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE) ||
        unset == LOCAL_PAIR_SWITCH_NEVER)
        return 0;
    return -EALREADY;
}

uint64_t local_pair_switch_get(local_ring_t *ch, int dir)
{
    local_pair_ctl_t *c = local_pair_ctl(ch);

    if (!c || (dir != LOCAL_RING_AB && dir != LOCAL_RING_BA))
        return LOCAL_PAIR_SWITCH_UNSET;
    return __atomic_load_n(&c->switch_at[dir], __ATOMIC_ACQUIRE);
}

size_t local_pair_rx_split(local_ring_t *ch, int dir, uint64_t consumed, size_t n)
{
    uint64_t sw = ch ? local_pair_switch_get(ch, dir) : LOCAL_PAIR_SWITCH_UNSET;

    if (sw == LOCAL_PAIR_SWITCH_UNSET || consumed + n <= sw)
        return n;
    if (consumed >= sw)
        return 0;
    return (size_t)(sw - consumed);
}
