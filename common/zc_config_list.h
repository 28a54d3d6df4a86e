/* Every ZCSOCK_* environment variable, declared once.
 * X(field, type, default, min, max, doc)
 *   type: BOOL (0/1, yes/no, on/off, true/false), UINT (decimal, min..max),
 *         SIZE (bytes with optional K/M/G suffix, min..max), PATH (string)
 * The variable table of docs/usage.md is checked against this list by the tests. */
#define ZC_CONFIG_LIST(X)                                                           \
    X(debug, UINT, 0, 0, 2,                                                         \
      "log one-line notices about fallbacks and missing features (1), or also "     \
      "every path decision (2)")                                                    \
    X(verbose, BOOL, 0, 0, 1,                                                       \
      "print the effective configuration at start-up")                              \
    X(stats, UINT, 0, 0, 3,                                                         \
      "print a key: value statistics report at exit, grouped, zero counters left "  \
      "out: 1 for processes that used sockets, 2 for every process, 3 for every "   \
      "process with the zero counters too")                                         \
    X(live, BOOL, 1, 0, 1,                                                          \
      "publish this process's counters for zcsock stat while it runs (a 0600 file " \
      "per process under $XDG_RUNTIME_DIR/zcsock, made at its first socket, "       \
      "removed at its exit)")                                                       \
    X(log_file, PATH, 0, 0, 0,                                                      \
      "append logs and reports to this file instead of stderr; %p becomes the pid") \
    X(library, PATH, 0, 0, 0,                                                       \
      "(launcher) the libzcsock.so that zcsock run preloads")                      \
    X(alloc_placement, BOOL, 0, 0, 1,                                               \
      "place large allocations in shareable, page-aligned memory (off until a "     \
      "path consumes placed blocks; 0: events only)")                               \
    X(exchange, BOOL, 1, 0, 1,                                                      \
      "page exchange on the local path where shared memory has 2 MiB pages (shmem " \
      "THP advise/within_size/always, or a hugetlb pool; elsewhere it stays off "   \
      "and copies through the ring, see ZCSOCK_EXCHANGE_4K): a send of whole 2 MiB units of a placed buffer lends the units "  \
      "to the peer (sealed unit files) instead of copying them, and a receive "     \
      "into a placed 2 MiB-aligned buffer maps them in place; places blocks of "    \
      "2 MiB and more that fill their 2 MiB units to at least 7/8 (0: the ring "   \
      "only, no placement)")                                                        \
    X(exchange_4k, BOOL, 0, 0, 1,                                                   \
      "page exchange also where shared memory has only 4 KiB pages (1): the "       \
      "same 2 MiB units, mapped 4 KiB page by page; make bench's crossover probe "  \
      "says whether that wins on this machine (off by default: measured on one "    \
      "machine only)")                                                              \
    X(exchange_unit_us, UINT, 0, 0, 10000000,                                      \
      "page exchange: what lending a 2 MiB unit the first time costs, in "          \
      "microseconds (a new page and a copy), weighed against sending it through " \
      "the ring: a unit goes through the ring until the passes it paid for with "   \
      "the same bytes add up to that, then it is lent (0: measured as the "         \
      "process runs; 1: every unit is lent at its first send)")                    \
    X(alloc_min, SIZE, 131072, 4096, 1ULL << 40,                                   \
      "allocations of at least this many bytes are placed")                         \
    X(alloc_huge_min, SIZE, 2097152, 4096, 1ULL << 40,                             \
      "placed allocations of at least this many bytes are 2 MiB aligned")           \
    X(pdc_max_bytes, SIZE, 268435456, 1048576, 1ULL << 44,                         \
      "pin-down cache: most bytes kept registered (also bounded by RLIMIT_MEMLOCK)") \
    X(pdc_max_entries, UINT, 1024, 1, 16384,                                        \
      "pin-down cache: most registrations kept")                                    \
    X(pdc_send_budget, SIZE, 134217728, 0, 1ULL << 44,                             \
      "pin-down cache: most bytes referenced by sends in flight (0: unlimited); "   \
      "page exchange: most lent bytes unread, per connection and for the "         \
      "process's connections together")                                             \
    X(pdc_recv_budget, SIZE, 134217728, 0, 1ULL << 44,                             \
      "pin-down cache: most bytes referenced by receives in flight (0: unlimited)") \
    X(local, BOOL, 1, 0, 1,                                                         \
      "pair same-host zcsock connections and move their bytes through shared memory") \
    X(local_unix, BOOL, 0, 0, 1,                                                    \
      "also pair AF_UNIX stream connections (off by default: small event-driven "   \
      "messages cost more than on a kernel AF_UNIX socket; one that carries "       \
      "ancillary data or sets SO_PASSCRED goes back to the kernel for good)")       \
    X(local_pair_after, UINT, 2, 0, 1000,                                          \
      "local path: a server offers the channel only once the connection has "      \
      "answered this many requests (and one more: the client announces at the "    \
      "request after this many answers), moved this many times 128 KiB or made "   \
      "this many times 512 data calls (the server twice that: a stream of small "  \
      "messages), so that a "                                                       \
      "connection carrying one request never pays for pairing; its first bytes "    \
      "go through the kernel and the switch happens mid-stream (0: offer at the "  \
      "server's first data call)")                                                  \
    X(local_pair_learn, BOOL, 1, 0, 1,                                              \
      "local path: with ZCSOCK_LOCAL_PAIR_AFTER > 0, each process learns how many "  \
      "requests its connections to a destination (and through a listener, shared " \
      "with its fork children) live, and puts pairing off past the lifetime of "    \
      "connections that closed before pairing paid (at most 64 requests; the "      \
      "bytes rule still pairs a bulk transfer at once): a server that answers a "   \
      "few requests per connection (pgbench -C) stays on the kernel; a listener "   \
      "whose last 8 connections in a row found no announcement at their first "     \
      "offer offers new ones once (0: pair at ZCSOCK_LOCAL_PAIR_AFTER always)")    \
    X(local_short_sample, UINT, 8, 0, 1000,                                          \
      "local path, with ZCSOCK_LOCAL_PAIR_LEARN: once the last 32 connections in a "  \
      "row to a destination (or through a listener, shared with its fork "           \
      "children) closed before they paid for pairing, only every this-many-th new "  \
      "one is tracked for pairing; the others stay the application's own kernel "    \
      "sockets, costing what they cost without the library, until a tracked one "   \
      "pairs (0: every connection is tracked)")                                        \
    X(local_ring, SIZE, 4194304, 65536, 1ULL << 30,                                 \
      "local path: ring bytes per direction of each connection (a power of two)") \
    X(wake_eventfd, BOOL, 1, 0, 1,                                                  \
      "local path: a poll/select/epoll waiter is woken through a wake-up "          \
      "descriptor of its own (an epoll instance the peer adds a private eventfd "   \
      "to, fetched once per connection with pidfd_getfd) instead of a doorbell "    \
      "byte through the kernel socket (0: doorbell bytes only)")                    \
    X(local_pump_ms, UINT, 50, 0, 600000,                                           \
      "local path: a hand-back leaves the bytes its peer wrote into the ring and it " \
      "did not read to the peer for this many ms, then a pump process of its own "  \
      "gives them to the kernel through the peer's socket, fetched with "           \
      "pidfd_getfd (0: no pump, they wait for the peer's next call)")               \
    X(signal_defer, BOOL, 1, 0, 1,                                                   \
      "run an application's signal handler that interrupts the library while it "   \
      "holds a connection's lock when the library lets go of it (so a handler's own " \
      "I/O on that connection cannot wait for ever); 0: handlers run at once, as "  \
      "installed")                                                                  \
    X(spin, BOOL, 1, 0, 1,                                                          \
      "adaptive spinning: a blocking call on a paired connection, or a poll/select/"\
      "epoll wait over one, whose waits lately ended within 200 us spins up to 50 us "\
      "before sleeping, while no CPU has more than one runnable task (0: never; "   \
      "ZCSOCK_SPIN_US > 0 fixes the spin instead)")                                 \
    X(epoll_scan_max, UINT, 16, 0, 65536,                                          \
      "an epoll wait over a set holding more than this many paired connections "   \
      "looks only at those that had an event, were found ready or asked to be "     \
      "looked at again since their wake-up was last armed, so its cost does not "  \
      "grow with the idle ones; up to this many are all looked at (and spun over) " \
      "every wait (0: always the ready list)")                                      \
    X(epoll_keep, BOOL, 1, 0, 1,                                                   \
      "an epoll DEL of a paired connection (both directions on the ring) from a "   \
      "set this process made and alone watches stays in the kernel, hidden, and "   \
      "the next ADD takes it back; a level-triggered MOD that changes nothing the " \
      "kernel asks for is not passed on: an event loop that drops and re-adds "     \
      "connections per request (redis-benchmark: 5 epoll_ctl a request) makes no "  \
      "system call for it.  A kept registration the kernel reports (a doorbell, "   \
      "EOF or reset) costs one wake-up and is deleted then (0: every epoll_ctl "    \
      "goes to the kernel)")                                                        \
    X(epoll_plain, BOOL, 1, 0, 1,                                                  \
      "the epoll registrations of a connection that has not paired yet (an "      \
      "accepted one until its offer, a client's until its announcement) stay the "  \
      "application's own in the kernel, as without the library, so that an "       \
      "event loop's epoll_ctl and epoll_wait over such connections (short ones, "   \
      "or any before they pair) cost what the kernel's do; they become the "        \
      "library's at the offer or announcement (an EPOLLONESHOT or EPOLLEXCLUSIVE "  \
      "one and a dup'ed descriptor's at once) (0: the library's from the claim on)") \
    X(poll_kernel_us, UINT, 50, 0, 1000,                                          \
      "a zero-timeout poll, select or epoll wait over a set holding a paired "      \
      "connection, repeated by a thread that called nothing else of the library "   \
      "in between (an MPI progress loop), asks the kernel about the set's other "   \
      "descriptors at most every this many microseconds while the kernel's last "  \
      "answer was nothing ready; in between it looks at the paired connections "   \
      "only, so a kernel descriptor made ready by another thread or process may "  \
      "show up that much later (0: the kernel is asked every time)")               \
    X(spin_us, UINT, 0, 0, 1000000,                                                 \
      "a blocking call or readiness wait over a paired connection spins this many " \
      "microseconds before sleeping, whatever the machine's load (0: adaptive, see " \
      "ZCSOCK_SPIN)")
