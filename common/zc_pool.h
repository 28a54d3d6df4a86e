/* A small allocator for the library's own metadata, backed by the real mmap.
 *
 * Modules that must never touch the process allocator (the pin-down cache's
 * regions and hash tables) get their memory here.  Power-of-two size classes
 * from 32 bytes to 64 KiB are carved from 1 MiB slabs and recycled through
 * free lists; larger blocks are mapped and unmapped directly.  Memory is not
 * returned to the system (the users bound their own metadata).
 *
 * Thread-safe (one spinlock, held for a few instructions); never calls
 * malloc, stdio or a sleeping lock, so it may be called with other library
 * locks held.  Not async-signal-safe.  Fork: call zc_pool_fork_prepare/
 * _parent/_child around fork (the shim's atfork handlers do). */
#ifndef ZC_POOL_H
#define ZC_POOL_H

#include <stddef.h>

/* Allocate size bytes (16-byte aligned, those size bytes zeroed; the block
 * is size rounded up to a power of two).  NULL when out of memory. */
void *zc_pool_alloc(size_t size);

/* Release ptr, which zc_pool_alloc(size) returned (size must match). */
void zc_pool_free(void *ptr, size_t size);

/* The same two with the (arg, ...) shape modules take in their parameters. */
void *zc_pool_alloc_cb(void *arg, size_t size);
void zc_pool_free_cb(void *arg, void *ptr, size_t size);

void zc_pool_fork_prepare(void);
void zc_pool_fork_parent(void);
void zc_pool_fork_child(void);

#endif
