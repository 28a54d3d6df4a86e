/* The shared-memory channel of the local path: one memfd, mapped MAP_SHARED
 * by two zcsock processes on one host, holding a header and two
 * single-producer/single-consumer rings (A->B and B->A).
 *
 * Layout of the memfd (all little-endian host order, both ends on one host):
 *
 *   [0, 4096)                  header: magic, version, sizes, per-side state,
 *                              per-direction control lines (local_ring_ctl_t)
 *   [4096, 4096 + R)           ring of direction A->B (LOCAL_RING_AB)
 *   [4096 + R, 4096 + 2R)      ring of direction B->A (LOCAL_RING_BA)
 *
 * R (ring_size) is a power of two.  A ring carries 8-byte aligned records:
 *
 *   struct { uint32_t type_flags; uint32_t len; }   8-byte record header
 *   BYTES  len = payload bytes, payload follows, padded to 8 bytes
 *   EOF    len = 0: the stream ends here (shutdown(SHUT_WR) / close)
 *   PAGES  len = 16 * n, n local_ring_page_t follow: pages handed over by
 *          page exchange instead of their bytes (format fixed now, produced
 *          by the later page-exchange work)
 *   MARK   len = 8, a uint64_t kind follows: a point in the stream that means
 *          something to the path (LOCAL_RING_MARK_REVERT: the stream goes on
 *          in the kernel socket; path_local.c, HAND-BACK)
 *   PAD    len = ring bytes skipped after the header (multiple of 8), no
 *          stream bytes: the hot window (LOCAL_RING_HOT below)
 *
 * so a write costs 8 bytes of header plus up to 7 of padding per record; big
 * writes are cut into LOCAL_RING_CHUNK records, each published as soon as it
 * is copied so the consumer copies out while the producer copies in.
 *
 * Control, per direction (every value is a 64-bit running position):
 *   producer line: head (end of published records), bytes_head (payload
 *                  bytes published, for FIONREAD), prod_waiting + want
 *   consumer line: tail (next unread byte), rec_left (unread payload bytes of
 *                  the BYTES record tail points into, 0: tail is at a record
 *                  header), bytes_tail, cons_waiting
 *
 * Trust: the peer can write anything into the shared mapping at any time.
 * Every value read from it is loaded once into a local, checked against the
 * ring size this process validated when it mapped the channel (never the
 * header's), and a violation marks the channel broken: every later call
 * returns -EPROTO.  Ring offsets are always masked with the local size, so no
 * access can leave the mapping whatever the peer writes.  The creator seals
 * the memfd against shrinking (F_SEAL_SHRINK), and attach refuses one that is
 * not sealed, so a peer cannot turn our accesses into SIGBUS.  All parsing of
 * shared content goes through local_ring_ctl_snap() and
 * local_ring_frame_parse(); tests/local/fuzz_ring.c fuzzes them.
 *
 * Concurrency: one producer and one consumer per direction at a time; the
 * caller serialises its own threads/processes per (direction, role).  The
 * two roles of one direction run concurrently in two processes.
 *
 * Wake-ups: the ring never sleeps.  A side that wants to sleep (consumer on
 * an empty ring, producer on a full one) calls *_wait_prepare, which
 * announces it and re-checks; then it sleeps on the kernel socket.  A side
 * that publishes data or frees space learns from the return flag
 * LOCAL_RING_F_DOORBELL that the peer sleeps, and then (only then) sends one
 * doorbell byte through the kernel socket.  The kernel socket carries only
 * doorbells once a connection uses the channel; its EOF/reset stays the
 * authoritative signal that the peer is gone (the per-side state in the
 * header is advisory: a crashed process cannot update it).
 *
 * Hook-safety: every function here is allocation-free, uses no stdio and no
 * getenv, and maps/unmaps through zc_real; all may run inside a hook.
 * None is async-signal-safe against a concurrent call on the same channel.
 * Return convention: >= 0 on success, -errno on failure.
 */
#ifndef LOCAL_RING_H
#define LOCAL_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define LOCAL_RING_MAGIC      0x676e69724c637a5aULL   /* "ZczLring" */
#define LOCAL_RING_VERSION    5u   /* 2: PAD records and the BOTH waiting kind; 3: the
                                    * path's side words name a socket (PEER PUMP); 4: the
                                    * path's lock words on lines of their own; 5: the
                                    * consumer's waiting word on a line of its own (TAIL
                                    * SEEN); a peer of another version never attaches
                                    * (plain TCP) */
#define LOCAL_RING_HDR_SIZE   4096u
#define LOCAL_RING_SIZE_MIN   4096u
#define LOCAL_RING_SIZE_MAX   (1u << 30)
#define LOCAL_RING_SIZE_DEFAULT (4u << 20)
#define LOCAL_RING_CHUNK      (64u << 10)     /* max payload per BYTES record */
#define LOCAL_RING_PAGES_MAX  16              /* descriptors per PAGES record */

enum { LOCAL_RING_AB = 0, LOCAL_RING_BA = 1 };         /* directions */
enum { LOCAL_RING_SIDE_A = 0, LOCAL_RING_SIDE_B = 1 };  /* A creates, B attaches */

/* Record types (low 8 bits of type_flags; the other 24 bits must be 0). */
enum { LOCAL_RING_REC_BYTES = 1, LOCAL_RING_REC_EOF = 2, LOCAL_RING_REC_PAGES = 3,
       LOCAL_RING_REC_MARK = 4,
       LOCAL_RING_REC_PAD = 5 };   /* len ring bytes skipped: no stream bytes.  A producer
                                    * told the traffic is request/response (ch->hot) that
                                    * finds the ring empty past the hot window writes one
                                    * up to the ring's end, so that the messages keep to the
                                    * first LOCAL_RING_HOT bytes (their cache lines and TLB
                                    * entries stay warm, and a connection's ring touches
                                    * no more pages than that: one page, not 16, cut the
                                    * shared memory of redis-benchmark's 1,000 busy
                                    * connections from 86 to 12 MiB in each process and
                                    * their page faults by 2 per connection and end);
                                    * always published together with the record after it */
#define LOCAL_RING_HOT 4096u
#define LOCAL_RING_HOT_MSG (16u << 10)  /* the largest message kept there */

/* Kinds of MARK record. */
enum { LOCAL_RING_MARK_REVERT = 1 };

/* Per-side state in the header (advisory liveness). */
enum { LOCAL_RING_PEER_NONE = 0, LOCAL_RING_PEER_ATTACHED = 1, LOCAL_RING_PEER_GONE = 2 };

/* Return flags of write/read/frame_consume. */
#define LOCAL_RING_F_DOORBELL 0x1   /* the peer sleeps: send it one doorbell */
#define LOCAL_RING_F_EOF      0x2   /* read: the stream ends after these bytes */
#define LOCAL_RING_F_RECORD   0x4   /* read: stopped at a PAGES or MARK record */
#define LOCAL_RING_F_FUTEX    0x8   /* the peer sleeps on the futex word: wake it there
                                     * (local_ring_wait_word), no doorbell byte */
#define LOCAL_RING_F_EVENTFD  0x10  /* the peer sleeps in poll/epoll listening to its
                                     * wake-up eventfd: write that, no doorbell byte */

/* How a side sleeps (the value it announces in its waiting word). */
enum { LOCAL_RING_WAIT_SOCKET = 1, LOCAL_RING_WAIT_FUTEX = 2, LOCAL_RING_WAIT_EVENTFD = 3,
       LOCAL_RING_WAIT_BOTH = 4,        /* producer only: a socket waiter and a futex
                                         * sleeper (a doorbell byte and a futex wake) */
       LOCAL_RING_WAIT_FUTEX_JOIN = 5   /* tx_wait_prepare_kind only, never stored: a
                                         * futex sleeper beside waiters of other threads
                                         * (a socket kind standing becomes BOTH) */
};

/* Roles for local_ring_ctl_snap. */
enum { LOCAL_RING_ROLE_PROD = 0, LOCAL_RING_ROLE_CONS = 1 };

/* local_ring_read flags */
#define LOCAL_RING_PEEK       0x1   /* copy without consuming (MSG_PEEK) */

/* A page-exchange descriptor: npages pages of 1 << shift bytes at offset
 * (aligned to the page size) in exchange segment seg. */
typedef struct local_ring_page {
    uint64_t offset;
    uint32_t npages;
    uint16_t seg;
    uint16_t shift;     /* 12 (4 KiB) or 21 (2 MiB) */
} local_ring_page_t;

/* One direction's control block in shared memory (two cache lines). */
typedef struct local_ring_ctl {
    /* producer line: written by the producer only */
    uint64_t head;
    uint64_t bytes_head;
    uint32_t prod_waiting;      /* producer sleeps for space (consumer clears) */
    uint32_t prod_want;         /* ... until this many bytes are free */
    uint32_t prod_spinning;     /* ... spinning before it sleeps (local_ring_spinning) */
    uint8_t  pad0[64 - 28];
    /* consumer line: written by the consumer only, at every read; the
     * producer loads it only when the tail it saw last leaves too little
     * room (TAIL SEEN, local_ring.c) */
    uint64_t tail;
    uint64_t bytes_tail;
    uint32_t rec_left;
    uint8_t  pad1[64 - 20];
    /* consumer's waiting line: written by the consumer only when it
     * announces a wait, loaded by the producer at every record it publishes */
    uint32_t cons_waiting;      /* consumer sleeps for data (producer clears) */
    uint32_t cons_spinning;     /* ... spinning before it sleeps (local_ring_spinning) */
    uint8_t  pad2[64 - 8];
} local_ring_ctl_t;

typedef struct local_ring_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t hdr_size;
    uint64_t ring_size;         /* bytes per direction */
    uint64_t total_size;        /* hdr_size + 2 * ring_size */
    uint32_t side_state[2];     /* LOCAL_RING_PEER_* per side */
    int32_t  side_pid[2];
    uint8_t  pad[64 - 48];
    local_ring_ctl_t ctl[2];    /* per direction */
} local_ring_hdr_t;

/* A validated snapshot of one direction's control block. */
typedef struct local_ring_snap {
    uint64_t head, tail;
    uint64_t bytes_head, bytes_tail;
    uint32_t rec_left;
} local_ring_snap_t;

/* A validated record, copied out of the ring. */
typedef struct local_ring_frame {
    int type;                   /* LOCAL_RING_REC_* */
    uint64_t skip;              /* PAGES: stream bytes of it already read (a partial
                                 * read left the rest: local_ring_frame_next) */
    uint32_t len;               /* payload bytes (BYTES) / descriptor bytes */
    uint64_t pos;               /* ring position of the record header */
    uint64_t next;              /* ring position of the next record */
    uint64_t bytes;             /* stream bytes it carries (BYTES, PAGES) */
    int npages;                 /* PAGES: descriptors in pages[] */
    uint32_t mark;              /* MARK: its kind */
    local_ring_page_t pages[LOCAL_RING_PAGES_MAX];
} local_ring_frame_t;

/* Per-process statistics: plain fields, updated by the calling side with
 * relaxed loads/stores (no locked instructions; a count may be lost when two
 * threads of one process race on the same field). */
typedef struct local_ring_stats {
    uint64_t bytes_in;          /* payload bytes written by this process */
    uint64_t bytes_out;         /* payload bytes consumed by this process */
    uint64_t records_in;
    uint64_t pads;              /* PAD records written (back to the hot window) */
    uint64_t doorbells_data;    /* write/eof/pages: consumer slept, doorbell needed */
    uint64_t doorbells_space;   /* read/consume: producer slept, doorbell needed */
    uint64_t waits;             /* wait_prepare said "sleep" */
    uint64_t wait_aborts;       /* wait_prepare found work after announcing */
    uint64_t full;              /* writes that found no room */
    uint64_t empty;             /* reads that found nothing */
    uint64_t proto_errors;      /* violations detected */
} local_ring_stats_t;

/* The process-local handle (trusted; lives in the caller's memory). */
typedef struct local_ring {
    uint8_t *base;              /* the mapping */
    size_t map_size;            /* what we mapped (validated) */
    uint64_t ring_size;         /* per direction (validated, power of two) */
    local_ring_hdr_t *hdr;
    uint8_t *ring[2];           /* data of each direction */
    int side;                   /* LOCAL_RING_SIDE_* */
    int broken;                 /* set on the first violation */
    int owned;                  /* 1: close unmaps */
    uint8_t wait_kind[2][2];    /* [dir][role]: how we announced our last wait */
    uint8_t armed[2][2];        /* [dir][role]: an announcement of ours may be out
                                 * (both consumer ones at start: the creator's S3
                                 * flags of local_pair.h) */
    int quiet;                  /* 1: never claim the peer's announcements (a
                                 * connection handed back to the kernel: no
                                 * doorbell may follow its last record) */
    int hot;                    /* the caller's hint: request/response traffic (it read
                                 * since it last wrote), so an empty ring may send the
                                 * next small message back to the hot window (PAD) */
    uint8_t others;             /* other waiters of this process (threads) may stand
                                 * in our announcements: a wait that needs none
                                 * after all puts back what stood before its own
                                 * (set by the caller; 0: ours alone, withdrawn) */
    uint64_t tail_seen[2];      /* [dir]: the consumer's tail as we last loaded it,
                                 * producing (TAIL SEEN in local_ring.c) */
    uint64_t bells_claimed;     /* our socket-kind announcements the peer claimed: each
                                 * is one doorbell byte sent (or on its way)
                                 * to our kernel socket */
    local_ring_stats_t stats;
    /* Page exchange: how local_ring_read turns a PAGES record's pages into
     * bytes (NULL: it stops at the record, LOCAL_RING_F_RECORD).  Called with
     * the record f, the offset off of the first byte wanted among its stream
     * bytes, and destination iovecs for the next bytes (at most the record's
     * rest); consume: these bytes end the record and the read consumes them.
     * Returns the bytes it placed (all of dst) or -errno (the read fails with
     * it, nothing consumed). */
    ssize_t (*pages_read)(void *ctx, int dir, const struct local_ring_frame *f, uint64_t off,
                          const struct iovec *dst, int dstcnt, int consume);
    void *pages_ctx;
} local_ring_t;

/* Create a channel with ring_size bytes per direction (0: the default;
 * otherwise a power of two in [LOCAL_RING_SIZE_MIN, LOCAL_RING_SIZE_MAX]),
 * map it and initialise *ch as side A.  Returns the memfd (close-on-exec,
 * sealed against resizing) to hand to the peer, or -errno (*ch untouched).
 * The caller owns the memfd; the mapping alone keeps the memory alive. */
int local_ring_create(size_t ring_size, local_ring_t *ch);

/* Is fd a file a PAGES record may name: a regular file of exactly size
 * bytes and inode ino, whose seals (F_GET_SEALS must succeed: only a memfd,
 * shmem or hugetlbfs, has them) forbid every write, shrink and grow, so
 * its bytes can change neither while a receiver copies from it nor while
 * a mapping of it outlives the record?  1 yes, 0 no. */
int local_ring_unit_file_ok(int fd, size_t size, uint64_t ino);

/* Map the channel behind memfd and initialise *ch as side B, after checking
 * that the memfd is sealed against shrinking and that magic, version and
 * sizes agree with its real size.  Returns 0, -EPROTO (not a valid channel),
 * or the -errno of fstat/mmap.  memfd stays the caller's. */
int local_ring_attach(int memfd, local_ring_t *ch);

/* Map the channel behind memfd again as side (a process image that inherited
 * it across exec), with the checks of local_ring_attach and without touching
 * the shared side state.  Returns 0 or -errno. */
int local_ring_adopt(int memfd, int side, local_ring_t *ch);

/* Initialise *ch over an existing mapping of map_size bytes at base, checking
 * the header like local_ring_attach (without the memfd checks).  Does not
 * take ownership: local_ring_close will not unmap it.  Used by attach, the
 * tests and the fuzz target. */
int local_ring_view_init(void *base, size_t map_size, int side, local_ring_t *ch);

/* Unmap the channel (when owned) and clear *ch.  With last set, first mark
 * this side LOCAL_RING_PEER_GONE in the header (the last holder of the
 * connection leaving; a forked child closing its copy must not). */
void local_ring_close(local_ring_t *ch, int last);

/* Mark this side LOCAL_RING_PEER_GONE without unmapping (the caller still
 * wakes sleepers before local_ring_close(ch, 0)). */
void local_ring_side_gone(local_ring_t *ch);

/* The peer side's advisory state (LOCAL_RING_PEER_*), or -EPROTO. */
int local_ring_peer_state(local_ring_t *ch);

/* Direction this side writes to / reads from. */
static inline int local_ring_dir_tx(const local_ring_t *ch) { return ch->side; }
static inline int local_ring_dir_rx(const local_ring_t *ch) { return !ch->side; }

/* Copy as much of iov[0..iovcnt) as fits into direction dir (gathered
 * straight from the iovecs, in records of at most LOCAL_RING_CHUNK bytes,
 * each published with release semantics).  *done_p = bytes copied (0 when
 * the ring is full).  Returns flags (LOCAL_RING_F_DOORBELL when the consumer
 * sleeps), -EINVAL for a bad argument, -EPROTO for a broken channel. */
int local_ring_write(local_ring_t *ch, int dir, const struct iovec *iov, int iovcnt,
                     size_t *done_p);

/* Append an EOF record (after all data written so far).  Returns flags,
 * -EAGAIN when there is no room for it yet, -EPROTO. */
int local_ring_eof_write(local_ring_t *ch, int dir);

/* Producer side: stream bytes of direction dir published and not yet read
 * (lent units included), at most 2^40 whatever the peer wrote. */
uint64_t local_ring_unread(local_ring_t *ch, int dir);

/* Producer side: stream bytes of direction dir published so far (lent
 * units included): the stream position local_ring_unread counts back from. */
uint64_t local_ring_bytes_head(local_ring_t *ch, int dir);

/* The ring position the next record of direction dir will have (the
 * producer's own head). */
uint64_t local_ring_head_pos(local_ring_t *ch, int dir);

/* Append a PAGES record of n (1..LOCAL_RING_PAGES_MAX) descriptors.  Returns
 * flags, -EAGAIN (no room), -EINVAL (bad descriptor), -EPROTO. */
int local_ring_pages_write(local_ring_t *ch, int dir, const local_ring_page_t *pages,
                           int n);

/* Append a MARK record of kind (LOCAL_RING_MARK_*), which needs 16 bytes of
 * room.  Returns flags, -EAGAIN (no room), -EINVAL, -EPROTO. */
int local_ring_mark_write(local_ring_t *ch, int dir, uint32_t kind);

/* Claim the peer's announcement of direction dir and role (as a write or a
 * read that made its wait come true would): the flags saying how to wake
 * it (LOCAL_RING_F_DOORBELL / LOCAL_RING_F_FUTEX), 0 when it was not
 * waiting.  Works in quiet mode too. */
int local_ring_claim(local_ring_t *ch, int dir, int role);

/* Claim the peer's announcement only when it stands as kind
 * (LOCAL_RING_WAIT_*): 1 when claimed, else 0. */
int local_ring_claim_kind(local_ring_t *ch, int dir, int role, int kind);

/* Copy stream bytes from direction dir into iov[0..iovcnt), scattered
 * straight into the iovecs, crossing records; consume them unless flags has
 * LOCAL_RING_PEEK.  Stops at an EOF record (LOCAL_RING_F_EOF; the record
 * stays, so later reads see EOF again), a MARK record, or a PAGES record when
 * ch->pages_read is NULL (LOCAL_RING_F_RECORD; take it with
 * local_ring_frame_next/consume).  With pages_read, a PAGES record's bytes
 * are read like a BYTES record's, through it; a read may take part of one
 * (the consumer line then says how much is left, LR_LEFT_PAGES).  *done_p = bytes copied; 0 with
 * no flag means empty.  Returns flags (LOCAL_RING_F_DOORBELL: the producer
 * sleeps for space that is now free), -EINVAL, -EPROTO. */
int local_ring_read(local_ring_t *ch, int dir, const struct iovec *iov, int iovcnt,
                    int flags, size_t *done_p);

/* Stream bytes readable now (for FIONREAD/poll), or -EPROTO.  Exact when
 * the ring is empty (0) and when the producer is not in the middle of
 * publishing; while it is, the count may include the record it is publishing
 * (a window of two stores). */
int64_t local_ring_readable(local_ring_t *ch, int dir);

/* 1 when direction dir holds no record at all (no data, no end), read
 * without the consumer's lock and without validating the control words: a
 * record published a moment later, or a tail another thread of ours moves
 * meanwhile, answers as a look made a moment earlier would; a peer that
 * scribbles over head can only hide what it would not have sent.  0 when
 * there may be something (the validating local_ring_readable tells). */
int local_ring_rx_idle(const local_ring_t *ch, int dir);

/* Stream bytes readable now from BYTES records alone, up to the first other
 * record (PAGES, a mark, EOF) or the end of what is published: what a read
 * of at least that many bytes will copy out of the ring.  The walk stops
 * once it counted max or more (and after 4096 records: a count short of the
 * truth, never past it).  Or -EPROTO. */
int64_t local_ring_bytes_run(local_ring_t *ch, int dir, uint64_t max);

/* Bytes of payload a write could store now in one record chain (for POLLOUT),
 * or -EPROTO. */
int64_t local_ring_writable(local_ring_t *ch, int dir);

/* The same, exact when it is less than min; at min or more it may be less
 * than the truth (what the consumer read since the producer last looked is
 * not counted: TAIL SEEN in local_ring.c), and costs the producer no look at
 * the consumer's line. */
int64_t local_ring_writable_min(local_ring_t *ch, int dir, uint64_t min);

/* The record at the read position, validated and copied into *f.  Returns
 * 0, -EAGAIN (empty), -EPROTO.  With the consumer inside a BYTES record,
 * f describes the rest of it (pos = tail, len = rec_left). */
int local_ring_frame_next(local_ring_t *ch, int dir, local_ring_frame_t *f);

/* Consume the record f returned by local_ring_frame_next (PAGES/EOF/BYTES
 * without copying).  Returns flags, -EINVAL (not the current record), -EPROTO. */
int local_ring_frame_consume(local_ring_t *ch, int dir, const local_ring_frame_t *f);

/* Waiting protocol.  Consumer: rx_wait_prepare announces that it is about to
 * sleep until data (or EOF) arrives and re-checks: returns 1 "sleep now on the
 * kernel socket", 0 "data is there, do not sleep" (announcement withdrawn),
 * -EPROTO.  After waking, rx_wait_cancel withdraws the announcement; it
 * returns 1 when the producer had already claimed it (a doorbell byte is or
 * will be in the socket), 0 otherwise.  Producer: tx_wait_prepare(want)
 * likewise for want bytes of free payload room (capped at half the ring),
 * tx_wait_cancel after waking. */
int local_ring_rx_wait_prepare(local_ring_t *ch, int dir);
/* The same, announcing how we sleep: LOCAL_RING_WAIT_SOCKET (the peer sends a
 * doorbell byte: LOCAL_RING_F_DOORBELL), LOCAL_RING_WAIT_FUTEX (the peer
 * wakes the futex word: LOCAL_RING_F_FUTEX) or, consumer only,
 * LOCAL_RING_WAIT_EVENTFD (the peer writes our wake-up eventfd:
 * LOCAL_RING_F_EVENTFD).  The plain forms announce the socket kind.  The
 * eventfd kind never replaces another kind standing in the word (a waiter
 * that listens only to the socket or the futex may be behind it): it is
 * stored only into an empty word, otherwise the standing kind stays (and
 * local_ring_rx_wait_kind() says which). */
int local_ring_rx_wait_prepare_kind(local_ring_t *ch, int dir, int kind);
/* The same, but the announcement stays when the ring has data already (1):
 * the producer's next write wakes the waiter (an edge-triggered epoll
 * waiter that reported the bytes there). */
int local_ring_rx_wait_arm_next(local_ring_t *ch, int dir, int kind);
int local_ring_tx_wait_prepare_kind(local_ring_t *ch, int dir, size_t want, int kind);

/* The shared word a side of direction dir waits on (role LOCAL_RING_ROLE_*):
 * holds LOCAL_RING_WAIT_FUTEX while a futex sleeper is announced. */
static inline uint32_t *local_ring_wait_word(local_ring_t *ch, int dir, int role)
{
    return role == LOCAL_RING_ROLE_CONS ? &ch->hdr->ctl[dir].cons_waiting
                                        : &ch->hdr->ctl[dir].prod_waiting;
}
/* SPINNING WAITERS: the word beside a wait word that says its one waiter
 * (a side with one thread, lp_alone) still spins and has not slept: the
 * side that claims its announcement then makes no FUTEX_WAKE (a streaming
 * receiver that spins made its sender wake it for every message, a system
 * call each).  The waiter clears it (sequentially consistent) before its
 * FUTEX_WAIT, which then finds the word claimed; the claimer reads it
 * after its claim (sequentially consistent): seen set, the waiter has not
 * slept yet and will see the claim.  A peer of an older build never sets
 * it (its sender always wakes) and never reads it. */
static inline uint32_t *local_ring_spinning(local_ring_t *ch, const uint32_t *word)
{
    for (int d = 0; d < 2; d++) {
        if (word == &ch->hdr->ctl[d].cons_waiting)
            return &ch->hdr->ctl[d].cons_spinning;
        if (word == &ch->hdr->ctl[d].prod_waiting)
            return &ch->hdr->ctl[d].prod_spinning;
    }
    return NULL;
}
int local_ring_rx_wait_cancel(local_ring_t *ch, int dir);
/* Withdraw our consumer announcement of dir only while the word still
 * holds kind (a blocking sleeper's futex announcement): one of another kind
 * that replaced it (a poll/epoll waiter's, which other threads rely on)
 * stays.  Returns like rx_wait_cancel. */
int local_ring_rx_wait_cancel_kind(local_ring_t *ch, int dir, int kind);
/* A blocked sender withdraws its futex part of the producer announcement
 * of dir: FUTEX goes, BOTH becomes SOCKET (the POLLOUT waiter beside it
 * stays); any other value (a socket waiter's, stored after ours was
 * claimed) is left alone.  It reads the word itself: the kind last stored
 * (local_ring_tx_wait_kind) may be another thread's.  Returns like
 * rx_wait_cancel. */
int local_ring_tx_wait_cancel_futex(local_ring_t *ch, int dir);
/* The kind our last producer announcement of dir was stored as. */
static inline int local_ring_tx_wait_kind(const local_ring_t *ch, int dir)
{
    return ch->wait_kind[dir][LOCAL_RING_ROLE_PROD];
}
/* The kind our last consumer announcement of dir stands as (0: none). */
static inline int local_ring_rx_wait_kind(const local_ring_t *ch, int dir)
{
    return ch->armed[dir][LOCAL_RING_ROLE_CONS] ? ch->wait_kind[dir][LOCAL_RING_ROLE_CONS] : 0;
}
/* 1 while this process's consumer announcement of dir may stand (armed by
 * a prepare of ours, not withdrawn by us). */
int local_ring_rx_armed(const local_ring_t *ch, int dir);
int local_ring_tx_wait_prepare(local_ring_t *ch, int dir, size_t want);
int local_ring_tx_wait_cancel(local_ring_t *ch, int dir);

/* The validating readers of shared memory (exposed for the fuzz target).
 * ctl_snap loads direction dir's control words once each and checks them
 * against the local ring size: as the producer (role LOCAL_RING_ROLE_PROD)
 * head and tail only, as the consumer (LOCAL_RING_ROLE_CONS) every field, in
 * an order that keeps bytes_head - bytes_tail >= 0 for an honest peer.
 * frame_parse reads the record at pos (which must lie in [s->tail, s->head])
 * into *f, copying it out before checking type, length and descriptors.  Both return 0, -EAGAIN (frame_parse: pos == head) or -EPROTO
 * and mark the channel broken on a violation. */
int local_ring_ctl_snap(local_ring_t *ch, int dir, int role, local_ring_snap_t *s);
int local_ring_frame_parse(local_ring_t *ch, int dir, const local_ring_snap_t *s,
                           uint64_t pos, local_ring_frame_t *f);

#endif
