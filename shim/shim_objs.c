/* What the loaded objects of the process can do behind the library's back
 * (shim_objects in shim_int.h):
 *   SHIM_OBJ_URING  an object is liburing, needs it (DT_NEEDED), or makes
 *                   io_uring_setup system calls inline (liburing linked
 *                   statically into the program or into a shared library):
 *                   its reads, writes and closes pass no hook;
 *   SHIM_OBJ_PINS   an object pins memory for the kernel or a device
 *                   (liburing's fixed buffers; RDMA verbs, CUDA, ROCm,
 *                   Level Zero, XPMEM registrations): the kernel or the
 *                   device writes into pinned pages behind any remap, so
 *                   page exchange must not replace a mapping the
 *                   application's memory lives in.
 * The objects are looked at again only when the loader added one since the
 * last look (dl_phdr_info.dlpi_adds); each object is searched for inline
 * calls once. */
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "shim_int.h"

typedef struct shim_objs_look {
    unsigned long long adds;    /* the loader's count of objects ever added */
    int flags, first;
} shim_objs_look_t;

static struct {
    unsigned long long adds;    /* the count at the last look */
    int flags;                  /* what that look found (sticky: dlclose keeps them) */
} shim_objs;

/* The file name of a loaded object, without its directory ("" for none). */
static const char *shim_object_base(const struct dl_phdr_info *info)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *slash = strrchr(name, '/');

    return slash ? slash + 1 : name;
}

/* Is the loaded object our own library? */
static int shim_object_ours(const struct dl_phdr_info *info)
{
    uintptr_t me = (uintptr_t)&shim_object_ours;
    int i;

    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t at = info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type == PT_LOAD && me >= at && me - at < ph->p_memsz)
            return 1;
    }
    return 0;
}

static int shim_name_is(const char *base, const char *const *names)
{
    for (; *names; names++)
        if (!strncmp(base, *names, strlen(*names)))
            return 1;
    return 0;
}

static const char *const shim_uring_names[] = { "liburing.so", "liburing-ffi.so", NULL };
/* Libraries that register (pin) application memory for a device or the
 * kernel. */
static const char *const shim_pin_names[] = {
    "libibverbs.so", "librdmacm.so", "libmlx5.so", "libmlx4.so", "libefa.so", "libfabric.so",
    "libcuda.so", "libcudart.so", "libamdhip64.so", "libhsa-runtime64.so", "libze_loader.so",
    "libxpmem.so", "libknem.so", "libgdrapi.so", NULL
};

/* Is the loaded object liburing, or does it need it (a DT_NEEDED entry)?
 * Our own library has it linked in (the pin-down cache's backend). */
static int shim_needs_uring(const struct dl_phdr_info *info)
{
    const ElfW(Dyn) *dyn = NULL, *d;
    uintptr_t strtab = 0;
    int i;

    if (shim_name_is(shim_object_base(info), shim_uring_names))
        return 1;       /* liburing itself (dlopen'ed by an FFI binding: ours is linked in) */
    if (shim_object_ours(info))
        return 0;
    for (i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;
    for (d = dyn; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB)
            strtab = d->d_un.d_ptr;
    if (!strtab)
        return 0;
    if (strtab < info->dlpi_addr)       /* not relocated in place (read-only .dynamic) */
        strtab += info->dlpi_addr;
    for (d = dyn; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED &&
            shim_name_is((const char *)strtab + d->d_un.d_val, shim_uring_names))
            return 1;
    return 0;
}

/* An object makes io_uring_setup system calls inline (liburing linked
 * statically: no DT_NEEDED entry, no libc function): the machine code that
 * loads the call's number into the system call register right before the
 * system call instruction, anywhere in its executable segments.  A match
 * that is no such call only keeps the process from pairing.  The search
 * looks for the needle's rarest byte with memchr and compares the needle
 * around each one found: memmem went at about 3 instructions a byte, 11 %
 * of the instructions of a Python start-up that loads libcrypto (20 of its
 * 180 million; 4.7 MB of code, where 0xa9 comes 2,720 times and 0xb8
 * 9,829). */
static int shim_inline_uring(const struct dl_phdr_info *info)
{
#if defined(__x86_64__)
    static const unsigned char nr[] = { 0xb8, 0xa9, 0x01, 0x00, 0x00 };     /* mov $425,%eax */
    static const unsigned char sc[] = { 0x0f, 0x05 };                       /* syscall */
#elif defined(__aarch64__)
    static const unsigned char nr[] = { 0x28, 0x35, 0x80, 0xd2 };           /* mov x8, #425 */
    static const unsigned char sc[] = { 0x01, 0x00, 0x00, 0xd4 };           /* svc #0 */
#endif
#if defined(__x86_64__) || defined(__aarch64__)
    enum { RARE = 1 };      /* the needle's rarest byte (0xa9; 0x35 on aarch64) */
    int i;

    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_filesz, *q;

        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !(ph->p_flags & PF_R) ||
            ph->p_filesz < sizeof(nr))
            continue;
        for (q = p + RARE; q < end && (q = memchr(q, nr[RARE], (size_t)(end - q))); q++) {
            const unsigned char *m = q - RARE, *after = m + sizeof(nr);

            if ((size_t)(end - m) < sizeof(nr) || memcmp(m, nr, sizeof(nr)))
                continue;
            if (memmem(after, (size_t)(end - after) < 32 ? (size_t)(end - after) : 32, sc,
                       sizeof(sc)))
                return 1;
        }
    }
    return 0;
#else
    (void)info;
    return 0;
#endif
}

/* Objects already searched for inline calls (their load addresses): each
 * is searched once; past SHIM_SCANNED_MAX objects the rest are searched at
 * every look (a look happens only when the loader added an object). */
#define SHIM_SCANNED_MAX 512
static struct { uintptr_t addr; uint32_t name; } shim_scanned[SHIM_SCANNED_MAX];
static int shim_nscanned;

/* Search one object for inline io_uring_setup calls, unless it was, or it
 * cannot have them: the vDSO, the C library and the loader (no io_uring
 * wrapper), ourselves (our liburing, which never touches an application's
 * socket).  Called under dl_iterate_phdr's lock: one at a time. */
static int shim_object_inline_uring(const struct dl_phdr_info *info)
{
    static const char *const skip[] = { "linux-vdso.so", "libc.so", "ld-linux", NULL };
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    uint32_t h = 2166136261u;   /* the name too: dlclose can free an address for another */
    int i;

    if (shim_name_is(shim_object_base(info), skip) || shim_object_ours(info))
        return 0;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 16777619u;
    for (i = 0; i < shim_nscanned; i++)
        if (shim_scanned[i].addr == info->dlpi_addr && shim_scanned[i].name == h)
            return 0;
    if (shim_nscanned < SHIM_SCANNED_MAX) {
        shim_scanned[shim_nscanned].addr = info->dlpi_addr;
        shim_scanned[shim_nscanned++].name = h;
    }
    return shim_inline_uring(info);
}

/* One loaded object (dl_iterate_phdr): what it can do; stop at once when
 * nothing was loaded since the last look. */
static int shim_object_seen(struct dl_phdr_info *info, size_t size, void *arg)
{
    shim_objs_look_t *st = arg;

    if (st->first) {
        st->first = 0;
        if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
            st->adds = info->dlpi_adds;
        if (st->adds && st->adds == __atomic_load_n(&shim_objs.adds, __ATOMIC_RELAXED))
            return 1;
    }
    if (shim_needs_uring(info) || shim_object_inline_uring(info))
        st->flags |= SHIM_OBJ_URING | SHIM_OBJ_PINS;
    if (shim_name_is(shim_object_base(info), shim_pin_names))
        st->flags |= SHIM_OBJ_PINS;
    return 0;
}

int shim_objects(void)
{
    shim_objs_look_t st = { 0, 0, 1 };

    dl_iterate_phdr(shim_object_seen, &st);
    if (st.first == 0 && st.adds != __atomic_load_n(&shim_objs.adds, __ATOMIC_RELAXED)) {
        __atomic_fetch_or(&shim_objs.flags, st.flags, __ATOMIC_RELAXED);
        __atomic_store_n(&shim_objs.adds, st.adds, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&shim_objs.flags, __ATOMIC_RELAXED);
}

void shim_objects_note(int flags)
{
    __atomic_fetch_or(&shim_objs.flags, flags, __ATOMIC_RELAXED);
}

int shim_pinners(void)
{
    return (__atomic_load_n(&shim_objs.flags, __ATOMIC_RELAXED) & SHIM_OBJ_PINS) ||
           (shim_objects() & SHIM_OBJ_PINS);
}
