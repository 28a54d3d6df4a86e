/* Pairing of same-host zcsock connections: which connections may use the
 * local path, and how the channel (local_ring.h) reaches both ends.
 *
 * PROTOCOL (v1).  Names below are abstract AF_UNIX names; they live in the
 * network namespace, vanish when the last descriptor of their socket closes
 * (so a crashed process leaves nothing behind), and carry socket cookies
 * (SO_COOKIE: 64-bit, never reused while the kernel runs), so a leftover or
 * a recycled inode can never be mistaken for a new socket.  Where the user
 * has a private directory (common/zc_key.h) the names are "zcsock/v2/..."
 * and carry, instead of the cookie, a keyed hash of the kind and the cookie
 * (SipHash-2-4 under <private dir>/key): another user, who cannot read the
 * key, can neither know nor bind first the name of a connection of ours.
 * The v1 names below, the cookie itself, are the fallback without one.
 *
 *   "\0zcsock/v1/L/<listener cookie, 16 hex>"   beacon (SOCK_DGRAM, never
 *       read).  Bound by local_pair_listen() in each zcsock process that
 *       listens on (or accepts from) a TCP listener; EADDRINUSE means another
 *       process of the prefork group holds it, which is as good.
 *   "\0zcsock/v1/C/<client socket cookie, 16 hex>"   announcement
 *       (SOCK_SEQPACKET listener).  Bound by the connecting side BEFORE the
 *       real connect(), so it exists before the peer can accept.
 *
 * 1. listen: the server binds the beacon of its listener (optimisation only:
 *    it lets clients skip announcing towards servers that cannot pair).
 * 2. connect (client): local_pair_connect_prepare() finds the listener of the
 *    destination with sock_diag (TCP; AF_UNIX skips this), requires its
 *    beacon and its owner uid == our euid, then binds the announcement.
 *    local_pair_connected() (after a blocking connect, or on the first call
 *    after EINPROGRESS) checks the connection exists and is local.  The
 *    client is then PENDING: it never waits for anything and keeps using the
 *    kernel stream until a handover arrives.
 * 3. accept (server): local_pair_accepted() looks the peer socket up with
 *    sock_diag (inet_diag exact 4-tuple; unix_diag peer), giving its cookie
 *    and owner uid; requires uid == our euid, connects to the peer's
 *    announcement name (absent: peer is not zcsock), requires SO_PEERCRED uid
 *    == our euid and that the SO_PEERCRED pid holds the connecting socket
 *    (/proc/PID/fd: a squatter of the name, same user or not, is refused),
 *    creates the channel, and sends ONE handover message {magic, server
 *    cookie, client cookie, fd_hint} + SCM_RIGHTS(memfd) non-blockingly.  A successful sendmsg is the
 *    decision PAIRED; any failure is DECLINED and nothing ever reaches the
 *    peer.  It must run before the server's first byte on the connection:
 *    inside accept(), or (to spare connections that never carry data) at
 *    the server's first data call on it, before any byte is written.
 * 4. pickup (client): local_pair_channel_recv() (non-blocking: accept4 +
 *    recvmsg on the announcement) validates the sender's SO_PEERCRED uid,
 *    the magic, exactly one descriptor, our own cookie in the offer, that
 *    the sender holds the socket at the other end of ours (sock_diag's peer
 *    has the offer's server cookie, and /proc/<SO_PEERCRED pid>/fd/<fd_hint>
 *    is that socket; a re-queue passes our own socket instead, so that
 *    its proof does not depend on the re-queuer or the server being alive
 *    when the other holders look: once one holder attached, all must), the
 *    memfd seals (local_ring_attach) and the cookies in the shared control
 *    block, and attaches as side B, which marks side B ATTACHED in the
 *    shared header.  The server connects before it sends: a pickup that
 *    finds the connection but not yet the offer (-EAGAIN) dup3()s that
 *    connection over the announcement descriptor (same number), so the
 *    next call reads the offer from it; an EOF there means no offer.
 *
 * SWITCH-OVER (per direction d; AB = server->client, BA = client->server).
 * The shared control block (local_pair_ctl_t, in the unused tail of the
 * channel's header page) holds switch_at[d], LOCAL_PAIR_SWITCH_UNSET until
 * the sender of d publishes it once: the number of application bytes it had
 * sent on the kernel stream when it stopped.  Rules:
 *   S1 a sender switches d only when it knows the receiver holds the channel:
 *      the client as soon as it attached (the server created it); the server
 *      only once side B's state is ATTACHED (local_pair_peer_attached()).
 *   S2 a sender publishes switch_at[d] (release) before its first ring record
 *      of d and before any doorbell of d; afterwards every byte it writes to
 *      the kernel stream in d is a doorbell, never data.
 *   S3 the creator initialises cons_waiting = 1 in both directions, so the
 *      first ring write of each direction always rings a doorbell: a receiver
 *      still blocked in a kernel recv (it did not know yet) is woken.
 *   R1 a receiver of d counts application bytes it consumed from the kernel
 *      stream (c).  After every kernel recv of n bytes it loads switch_at[d]
 *      (acquire) and keeps only local_pair_rx_split() of them as data: bytes
 *      at stream positions >= switch_at[d] are doorbells.  With switch_at
 *      known beforehand it asks the kernel for at most switch_at - c bytes.
 *   R2 once c == switch_at[d], d is read from the ring (entering ring mode
 *      with local_ring_rx_wait_cancel() to take over the S3 flag).
 *   R3 a PENDING client that received kernel bytes checks for the handover
 *      AFTER the recv: present -> attach, apply R1; absent -> the server made
 *      no offer (its offer precedes its first byte), the pairing is over:
 *      close the announcement, plain TCP for good.
 * Proof sketch.  (a) Data is never lost: by S1 the sender writes the ring only
 *   when the receiver has the channel (the creator always has; the client's
 *   attach precedes the ATTACHED state the server waits for).  (b) Every byte
 *   is classified right: a receiver interprets a kernel byte at position p
 *   after the recv returned it; if p >= switch_at, the sender published
 *   switch_at before sending that byte (S2), and the sender's send happened
 *   before our recv returned it, so our load sees it; if p < switch_at the
 *   byte is data whatever we load (UNSET compares as infinite).  (c) No
 *   waiting: nobody ever blocks for the peer's pairing steps; a receiver
 *   blocked in the kernel is woken by S3.  (d) A non-zcsock peer: a non-zcsock
 *   server never sends a handover (client stays TCP, R3); a non-zcsock client
 *   never announced, so the server's connect to the name fails and it sends
 *   nothing anywhere.  Doorbells are sent only to a peer that attached.
 *   (e) A lost handover (the client closed, exec'd or crashed before the
 *   pickup) only means side B never becomes ATTACHED: by S1 nothing switches.
 *   (f) Other users never pair: the server checks the client socket's owner
 *   and the announcement's owner; the client checks the sender's
 *   SO_PEERCRED; the memfd is only ever sent to a same-uid socket.
 *
 * Fork: a PENDING client that forks must not let one holder pick up the
 * handover while another keeps reading the stream unaware.  The shim passes
 * LOCAL_PAIR_F_REQUEUE to local_pair_channel_recv() for connections that were
 * pending across a fork: before attaching, the picker connects to its own
 * announcement name again and sends the same offer, which waits in the
 * listener that every forked holder shares; each holder finds it when R3
 * makes it look (and requeues it in turn).  When the name is gone, no other
 * holder is left.
 *
 * Hook-safety: no allocation, no stdio, no getenv; every socket and close
 * call goes through zc_real.  Process-wide state: one cached sock_diag
 * netlink socket (try-lock; a busy or stale one is bypassed/reopened, see
 * local_pair_fd_is_internal) and a lock-free cache of listener cookies whose
 * beacon was seen.  Thread-safe, not async-signal-safe.  Descriptors the
 * caller keeps: one beacon per listener, one announcement per pending
 * client connection, one memfd per paired connection (all close-on-exec).
 * Return convention: 0 / -errno, or a decision (>= 0) where stated.  Every
 * function may change errno (hooks save and restore it around them), and
 * the caller should refuse close/dup2 over the descriptors it keeps for
 * this module, as over local_pair_fd_is_internal().
 */
#ifndef LOCAL_PAIR_H
#define LOCAL_PAIR_H

#include <stdint.h>
#include <sys/socket.h>

#include "local_ring.h"

/* Decisions. */
enum {
    LOCAL_PAIR_DECLINED = 0,
    LOCAL_PAIR_PENDING = 1,     /* client: announced, waiting for an offer */
    LOCAL_PAIR_PAIRED = 2,      /* server: offer sent; client: attached */
};

/* Why a connection does not pair (for the shim's counters). */
enum {
    LOCAL_PAIR_R_NONE = 0,
    LOCAL_PAIR_R_NOT_ZCSOCK,    /* no beacon / no announcement / no offer */
    LOCAL_PAIR_R_OTHER_USER,
    LOCAL_PAIR_R_NOT_LOCAL,     /* peer socket not in this network namespace */
    LOCAL_PAIR_R_UNSUPPORTED,   /* family/type not paired (UDP, raw, ...) */
    LOCAL_PAIR_R_DISABLED,      /* caller's configuration */
    LOCAL_PAIR_R_ERROR,         /* a resource failed (fd limit, memory, ...) */
    LOCAL_PAIR_R_UNVERIFIED,    /* the announcement's owner does not hold the
                                 * connecting socket (a squatter, or the
                                 * announcer exited after a fork) */
    LOCAL_PAIR_R_IO_URING,      /* this process loaded liburing, whose inline
                                 * system calls no hook sees */
    LOCAL_PAIR_R_CLOSED,        /* the connection ended before it could pair:
                                   the server answered and closed before the
                                   client picked its offer up (a one-request
                                   connection), or the client closed before
                                   the server's first data call */
    LOCAL_PAIR_R_CONNECT_FAILED, /* the application's connect failed (refused,
                                  * unreachable, reset): no connection to pair */
    LOCAL_PAIR_R_MAILBOX,       /* another process holds this process's mailbox
                                 * name: a peer closing with bytes unread, or a
                                 * hand-over, would find no mailbox of ours */
    LOCAL_PAIR_R_SQUATTED,      /* another process holds the name of this
                                 * connection's announcement */
    LOCAL_PAIR_R_SHORT,         /* the server deferred its offer (ZCSOCK_LOCAL_PAIR_AFTER)
                                 * and the connection closed before it paid */
    LOCAL_PAIR_R_FD_LIMIT,      /* the process's paired connections already hold
                                 * a quarter of its RLIMIT_NOFILE in descriptors
                                 * of the library's */
    LOCAL_PAIR_R_LEARNED_SHORT, /* the connections before it to the same place
                                 * closed before they paid, 32 in a row: not
                                 * tracked (ZCSOCK_LOCAL_SHORT_SAMPLE) */
    LOCAL_PAIR_R_MAP_LIMIT,     /* the process's channels already hold a quarter
                                 * of vm.max_map_count in mappings or of
                                 * RLIMIT_AS in address space, or a channel's
                                 * mapping failed (ENOMEM) */
    LOCAL_PAIR_R_COUNT
};

/* Short lowercase name of a reason ("not_zcsock", ...), for counters. */
const char *local_pair_reason_name(int reason);

#define LOCAL_PAIR_SWITCH_UNSET UINT64_MAX
#define LOCAL_PAIR_SWITCH_NEVER (UINT64_MAX - 1)   /* refused by the receiver */

/* A switch point read from the channel is a stream position. */
static inline int local_pair_switch_known(uint64_t sw)
{
    return sw != LOCAL_PAIR_SWITCH_UNSET && sw != LOCAL_PAIR_SWITCH_NEVER;
}
#define LOCAL_PAIR_CTL_OFF      3840u       /* in the channel's header page */
#define LOCAL_PAIR_CTL_MAGIC    0x3172696150637a5aULL  /* "ZczPair1" */

/* Shared per-connection control block at LOCAL_PAIR_CTL_OFF of the memfd
 * (the header page tail that local_ring_hdr_t leaves unused).  Peer-writable:
 * read with the helpers only. */
typedef struct local_pair_ctl {
    uint64_t magic;
    uint64_t server_cookie;
    uint64_t client_cookie;
    uint64_t switch_at[2];      /* per direction (LOCAL_RING_AB / _BA) */
} local_pair_ctl_t;

/* The offer message (one SOCK_SEQPACKET record, with exactly one
 * SCM_RIGHTS descriptor: the channel memfd).  fd_hint: the number of the
 * sender's descriptor of the server socket (a re-queue: of the client
 * socket), which the receiver checks through /proc/<SO_PEERCRED pid>/fd. */
#define LOCAL_PAIR_OFFER_MAGIC 0x3176666f50637a5aULL  /* "ZcPoffv1" */
typedef struct local_pair_offer {
    uint64_t magic;
    uint64_t server_cookie;     /* SO_COOKIE of the accepted socket */
    uint64_t client_cookie;     /* SO_COOKIE of the connecting socket */
    uint64_t fd_hint;
} local_pair_offer_t;

/* fd_hint of a re-queued offer: it carries the client socket as a second
 * descriptor, the proof that its sender holds the connection. */
#define LOCAL_PAIR_HINT_REQUEUE (1ULL << 63)

/* Flags of local_pair_channel_recv. */
#define LOCAL_PAIR_F_REQUEUE 0x1

/* Server: bind the beacon of TCP listener fd (after the real listen(), or on
 * the first accept from a listener this process inherited).  *beacon_p gets
 * the beacon's descriptor (close-on-exec; the caller keeps it while it
 * keeps the listener and closes it with local_pair_fd_close), or -1 when
 * another process already holds the name (fine) or fd is not a TCP
 * listener (returns -ENOTSUP then).  Returns 0 or -errno. */
int local_pair_listen(int fd, int *beacon_p);

/* COOKIES: the steps below take fd's socket cookie as *cookie when the
 * caller knows it (nonzero), else ask the kernel and leave it there.
 *
 * Client: before the real connect(fd, addr, len).  TCP: announces only
 * when a listener on addr exists in this namespace, has a beacon and has
 * our owner uid; AF_UNIX stream: always announces.  On LOCAL_PAIR_PENDING,
 * *ann_p is the announcement descriptor (the caller keeps it until the
 * pickup, the R3 decline, or close); on LOCAL_PAIR_DECLINED *ann_p = -1 and
 * *reason_p says why.  Returns the decision (>= 0); never fails the
 * application's call. */
int local_pair_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len,
                               uint64_t *cookie, int *ann_p, int *reason_p);

/* Client, a connection that connected and pays (ZCSOCK_LOCAL_PAIR_AFTER):
 * destinations a connection of this process found, within the last
 * LOCAL_PAIR_DEST_MS, not worth asking about (no listener in this
 * namespace, another user's, or one without a beacon), so that the next
 * connections to them skip the sock_diag query and the beacon probe.
 * local_pair_dest_known: 1 with *reason_p when addr is such a destination;
 * local_pair_dest_note: remembers addr after local_pair_connect_prepare
 * declined it for one of those reasons (others are not remembered).  A
 * listener that appears or gains a beacon meanwhile is missed for at most
 * that long; lock-free, safe from any thread and from signal handlers. */
#define LOCAL_PAIR_DEST_MS 1000
int local_pair_dest_known(const struct sockaddr *addr, socklen_t len, int *reason_p);
void local_pair_dest_note(const struct sockaddr *addr, socklen_t len, int reason);

/* Client: the connect completed (blocking success, or SO_ERROR == 0 after
 * EINPROGRESS).  Checks the connection is established (peer: its address
 * when the caller just read it with getpeername, else NULL) and local (at
 * once for a loopback peer).  Returns
 * LOCAL_PAIR_PENDING, or LOCAL_PAIR_DECLINED (then close *ann_p with
 * local_pair_fd_close; *reason_p says why). */
int local_pair_connected(int fd, int ann, const struct sockaddr *peer, socklen_t peer_len,
                         int *reason_p);

/* Server: fd was just accepted from listen_fd (accept or accept4, before
 * returning to the application).  On LOCAL_PAIR_PAIRED *ch is the channel
 * (side A) and *memfd_p its memfd (close-on-exec); otherwise *reason_p says
 * why.  ring_size as local_ring_create (0: default).  listen_fd is not
 * used yet (the shim calls local_pair_listen on a listener it inherited
 * and holds no beacon for).  Never sends anything to a peer that did not
 * announce. */
int local_pair_accepted(int listen_fd, int fd, uint64_t *cookie, size_t ring_size,
                        local_ring_t *ch, int *memfd_p, int *reason_p);

/* Client: pick up the server's offer for connection fd from announcement
 * ann without waiting.  Returns 0 (attached: *ch side B, *memfd_p its memfd),
 * -EAGAIN (nothing yet; ann may now be the server's connection, same
 * number), -ECONNRESET (the server connected and gave up: no offer will
 * come), -EPROTO/-EPERM (an invalid or foreign offer was discarded), other
 * -errno.  Under R3 (after kernel bytes arrived) anything but 0 means "no
 * offer": close ann and stay on the kernel stream. */
int local_pair_channel_recv(int fd, int ann, int flags, uint64_t *cookie, local_ring_t *ch,
                            int *memfd_p);

/* The control block of a mapped channel, or NULL when its magic is wrong. */
local_pair_ctl_t *local_pair_ctl(local_ring_t *ch);

/* Server: 1 when side B attached (rule S1), else 0. */
int local_pair_peer_attached(local_ring_t *ch);

/* The inode of the socket at the other end of connected AF_UNIX socket fd
 * (unix_diag).  0 or -errno. */
int local_pair_unix_peer_ino(int fd, uint64_t *ino);

/* Sender: publish switch_at[dir] = sent (rule S2; once).  -EALREADY if set. */
int local_pair_switch_publish(local_ring_t *ch, int dir, uint64_t sent);

/* Receiver: make sure direction dir never switches (it is about to shut its
 * own sending side down in the kernel and could ring no more doorbells):
 * switch_at[dir] = LOCAL_PAIR_SWITCH_NEVER unless the sender already
 * published.  Returns 0, or -EALREADY (switched: use the ring). */
int local_pair_switch_refuse(local_ring_t *ch, int dir);

/* Receiver: switch_at[dir] (acquire), LOCAL_PAIR_SWITCH_UNSET if not yet. */
uint64_t local_pair_switch_get(local_ring_t *ch, int dir);

/* Receiver, rule R1: of n bytes just received from the kernel stream at
 * stream position consumed, how many are data.  ch may be NULL (no channel:
 * all n). */
size_t local_pair_rx_split(local_ring_t *ch, int dir, uint64_t consumed, size_t n);

/* Close a beacon/announcement/memfd descriptor through zc_real (ignores -1). */
void local_pair_fd_close(int fd);

/* The process holds no local connection any more: a fork child closes the
 * copy of its parent's cached sock_diag socket; the process's own stays
 * (one descriptor above the floor for the process's life).  Skipped while
 * a query is using it.  Hook-safe. */
void local_pair_idle(void);

/* 1 when fd is the module's cached sock_diag netlink socket in this process
 * (the close/dup2/close_range hooks should refuse to touch it, like the
 * memory subsystem's arena descriptors).  Hook-safe. */
int local_pair_fd_is_internal(int fd);

#endif
