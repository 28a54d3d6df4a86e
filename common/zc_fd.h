/* Where the library's own descriptors go.
 *
 * Programs expect the lowest free numbers from open() and socket(), dup2
 * onto small numbers, and probe large ones they take to be surely unused
 * (CPython's test suite registers descriptor 10,000 with epoll expecting
 * EBADF; with the common soft limit of 20,000 the library's descriptors
 * used to sit exactly there, at half the limit).  So the library's
 * descriptors go to the top of the soft RLIMIT_NOFILE: the last quarter of
 * it, at most its last 1,024 numbers, and never above 65,536 (the kernel
 * grows a process's descriptor table to the highest number in use, and a
 * table of a million entries costs 8 MiB and slows every fork). */
#ifndef ZC_FD_H
#define ZC_FD_H

/* The lowest number the library's descriptors take (0: the limit is too
 * small to keep any out of the way).  Hook-safe.  Read from the limit
 * at the first call and every 256th (a getrlimit per descriptor was a
 * system call per connection); a move that fails because the application
 * lowered the limit since calls zc_fd_floor_refresh and tries again. */
int zc_fd_floor(void);

/* Read the soft limit again; returns the new floor. */
int zc_fd_floor_refresh(void);

/* The soft RLIMIT_NOFILE as last read with the floor (0: unknown). */
long zc_fd_limit(void);

#endif
