/* libFuzzer target for the shared-memory side of shim/paths/local/local_ring.c: the
 * header check (local_ring_view_init), the control-block snapshot and the
 * record parser (local_ring_ctl_snap, local_ring_frame_parse) and every
 * reader/writer built on them, driven over a channel image whose bytes the
 * input corrupts at will.
 *
 * Input = one mode byte, then:
 *   mode 0  raw image: the input is copied over the header/control block and
 *           the start of both rings, then readers and writers run on it.
 *   mode 1  operations on a valid 4 KiB-per-direction channel: legitimate
 *           writes/reads/peeks/EOF/PAGES/wait calls interleaved with "pokes"
 *           that overwrite any byte of the shared image (a hostile peer).
 *           Until the first poke the reads are checked against a model of the
 *           stream (a differential test); after it, only "no crash, no access
 *           outside the image, -EPROTO is sticky".
 * The image is one exact-size heap allocation, so ASan flags any access
 * outside it.  Build: make fuzz-ring (clang -fsanitize=fuzzer,address,undefined).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "local_ring.h"

#define F_RING   4096u
#define F_TOTAL  (LOCAL_RING_HDR_SIZE + 2 * F_RING)
#define F_MODEL  (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in_t;

static unsigned fz_u8(fz_in_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static unsigned fz_u16(fz_in_t *in)
{
    return fz_u8(in) | fz_u8(in) << 8;
}

static void fz_image_init(uint8_t *img)
{
    local_ring_hdr_t *h = (local_ring_hdr_t *)img;

    memset(img, 0, F_TOTAL);
    h->magic = LOCAL_RING_MAGIC;
    h->version = LOCAL_RING_VERSION;
    h->hdr_size = LOCAL_RING_HDR_SIZE;
    h->ring_size = F_RING;
    h->total_size = F_TOTAL;
}

static uint8_t fz_src[F_MODEL], fz_dst[F_MODEL];

/* Stream byte k of the model: writes start at fz_src + (stream offset mod
 * F_MODEL / 2) and fz_src has that period, so byte k is fz_gen(k). */
static uint8_t fz_gen(uint64_t k)
{
    k %= F_MODEL / 2;
    return (uint8_t)(k * 131 + (k >> 9));
}

/* Read with a few iovecs of input-chosen sizes; returns bytes or -errno. */
static long fz_read(local_ring_t *ch, int dir, fz_in_t *in, int flags)
{
    struct iovec v[4];
    int cnt = 1 + (int)(fz_u8(in) % 4);
    size_t off = 0, done;
    int rc;

    for (int i = 0; i < cnt; i++) {
        size_t k = fz_u16(in) % 3000;

        v[i].iov_base = fz_dst + off;
        v[i].iov_len = k;
        off += k;
    }
    rc = local_ring_read(ch, dir, v, cnt, flags, &done);
    if (rc < 0)
        return rc;
    if (done > off)
        abort();
    return (long)done;
}

static long fz_write(local_ring_t *ch, int dir, fz_in_t *in, size_t src_off)
{
    struct iovec v[3];
    size_t done, off = src_off;
    int cnt = 1 + (int)(fz_u8(in) % 3), rc;

    for (int i = 0; i < cnt; i++) {
        size_t k = fz_u16(in) % 2500;

        if (off + k > F_MODEL)
            k = 0;
        v[i].iov_base = fz_src + off;
        v[i].iov_len = k;
        off += k;
    }
    rc = local_ring_write(ch, dir, v, cnt, &done);
    if (rc < 0)
        return rc;
    if (done > off - src_off)
        abort();
    return (long)done;
}

static void fz_exercise(local_ring_t *ch, int dir)
{
    local_ring_frame_t f;
    local_ring_snap_t s;

    local_ring_readable(ch, dir);
    local_ring_writable(ch, dir);
    local_ring_peer_state(ch);
    if (local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s) == 0)
        local_ring_frame_parse(ch, dir, &s, s.tail + 8 * (s.rec_left != 0), &f);
    if (local_ring_frame_next(ch, dir, &f) == 0)
        local_ring_frame_consume(ch, dir, &f);
    if (local_ring_rx_wait_prepare(ch, dir) == 1)
        local_ring_rx_wait_cancel(ch, dir);
    if (local_ring_tx_wait_prepare(ch, dir, 100) == 1)
        local_ring_tx_wait_cancel(ch, dir);
}

static void fz_raw(uint8_t *img, fz_in_t *in)
{
    local_ring_t ch;
    size_t n = in->n < 512 ? in->n : 512;
    fz_in_t ops;

    /* header + control block from the input, or a valid header and only the
     * control block (offset 64 on) from the input */
    if (n && (in->p[0] & 1)) {
        memcpy(img, in->p, n);
    } else {
        fz_image_init(img);
        if (n > 64)
            memcpy(img + 64, in->p + 64, n - 64);
    }
    in->p += n;
    in->n -= n;
    n = in->n < F_RING ? in->n : F_RING;
    memcpy(img + LOCAL_RING_HDR_SIZE, in->p, n);
    memcpy(img + LOCAL_RING_HDR_SIZE + F_RING, in->p, n);
    ops = *in;
    if (local_ring_view_init(img, F_TOTAL, in->n & 1, &ch))
        return;
    for (int dir = 0; dir < 2; dir++) {
        fz_exercise(&ch, dir);
        for (int i = 0; i < 4; i++)
            fz_read(&ch, dir, &ops, i & 1 ? LOCAL_RING_PEEK : 0);
        fz_write(&ch, dir, &ops, 0);
        local_ring_eof_write(&ch, dir);
    }
}

static void fz_ops(uint8_t *img, fz_in_t *in)
{
    uint64_t w_off = 0, r_off = 0;      /* model: bytes written / consumed */
    int clean = 1, eof = 0, pages = 0;
    local_ring_t ch;

    fz_image_init(img);
    if (local_ring_view_init(img, F_TOTAL, LOCAL_RING_SIDE_A, &ch))
        abort();
    while (in->n) {
        unsigned op = fz_u8(in) % 10;
        long r;

        switch (op) {
        case 0: case 1:                                 /* write */
            if (eof || pages)
                break;
            r = fz_write(&ch, LOCAL_RING_AB, in, w_off % (F_MODEL / 2));
            if (clean && r < 0)
                abort();
            if (r > 0)
                w_off += (uint64_t)r;
            break;
        case 2: case 3: {                               /* read / peek */
            int peek = op == 3;
            uint64_t at = r_off;

            r = fz_read(&ch, LOCAL_RING_AB, in, peek ? LOCAL_RING_PEEK : 0);
            if (clean && r < 0)
                abort();
            if (clean && r > 0) {
                for (long i = 0; i < r; i++)
                    if (fz_dst[i] != fz_gen(at + (uint64_t)i))
                        abort();
                if (!peek)
                    r_off += (uint64_t)r;
                if (r_off > w_off)
                    abort();
            }
            break;
        }
        case 4:                                         /* EOF */
            if (local_ring_eof_write(&ch, LOCAL_RING_AB) >= 0)
                eof = 1;
            break;
        case 5: {                                       /* PAGES */
            local_ring_page_t pg = { (uint64_t)fz_u16(in) << 12, 1 + fz_u8(in), 0, 12 };

            if (!eof && local_ring_pages_write(&ch, LOCAL_RING_AB, &pg, 1) >= 0)
                pages = 1;
            break;
        }
        case 6:                                         /* poke shared memory */
            img[fz_u16(in) % F_TOTAL] = (uint8_t)fz_u8(in);
            clean = 0;
            break;
        case 7: {                                       /* poke a control word */
            uint64_t *w = (uint64_t *)&ch.hdr->ctl[fz_u8(in) & 1] + fz_u8(in) % 16;

            *w += (uint64_t)(int8_t)fz_u8(in);
            clean = 0;
            break;
        }
        case 8:
            fz_exercise(&ch, LOCAL_RING_AB);
            fz_exercise(&ch, LOCAL_RING_BA);
            clean = 0;          /* frame_consume may skip bytes */
            break;
        default: {
            int64_t a = local_ring_readable(&ch, LOCAL_RING_AB);

            if (clean && !pages && a != (int64_t)(w_off - r_off))
                abort();
            break;
        }
        }
        if (ch.broken && clean)
            abort();        /* a violation without any corruption */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *img = malloc(F_TOTAL);
    fz_in_t in = { data, size };

    if (!img)
        return 0;
    if (!fz_src[2])
        for (size_t i = 0; i < F_MODEL; i++)
            fz_src[i] = fz_gen(i);
    if (fz_u8(&in) & 1)
        fz_ops(img, &in);
    else
        fz_raw(img, &in);
    free(img);
    return 0;
}
