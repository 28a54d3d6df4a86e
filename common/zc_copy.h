/* Bulk copies that never hit memcpy's 4 KiB-aliasing trap.
 *
 * glibc's memcpy moves blocks of about 2 KiB to 1 MiB with `rep movsb`.  On
 * this project's machine (AMD EPYC with ERMS/FSRM) that instruction crawls
 * when the destination lies a few bytes past the source modulo 4 KiB: a
 * 4 KiB copy with dst - src = 8 (mod 4096) takes 1150 ns instead of 42
 * (3.5 GB/s instead of 98; 16 and 24 bytes: 100 ns; 32 and more: normal).
 * The local path's ring puts each record's payload 8 bytes past its
 * header, and the buffers malloc gives large blocks start 16 bytes into a
 * page, so ring copies land there whenever a record starts near a page
 * boundary: every one of them when the messages are 4088 bytes, about one
 * in a hundred in bulk streaming.  zc_copy takes exactly those copies
 * through a plain loop of 32-byte vector moves (AVX2 where the CPU has
 * it: 50-80 GB/s whatever the alignment) and everything else to memcpy.
 * Source and destination must not overlap.  Hook-safe (no allocation, no
 * locking). */
#ifndef ZC_COPY_H
#define ZC_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ZC_COPY_LOOP_MIN  2048u         /* below: memcpy's vector paths are fine */
#define ZC_COPY_LOOP_MAX  (1u << 20)    /* from here memcpy streams, any alignment */

void zc_copy_loop(void *dst, const void *src, size_t n);

/* The trap: dst 1..63 bytes past src modulo 4 KiB. */
static inline int zc_copy_aliases(const void *dst, const void *src)
{
    return (((uintptr_t)dst - (uintptr_t)src) & 4095) - 1 < 63;
}

static inline void zc_copy(void *dst, const void *src, size_t n)
{
    if (n >= ZC_COPY_LOOP_MIN && n < ZC_COPY_LOOP_MAX && zc_copy_aliases(dst, src))
        zc_copy_loop(dst, src, n);
    else
        memcpy(dst, src, n);
}

#endif
