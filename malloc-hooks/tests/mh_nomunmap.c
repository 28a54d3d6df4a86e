/* Preloaded in front of the library by the self-test case: its munmap goes
 * straight to the kernel, so the library's munmap hook never runs and the
 * start-up self-test must notice the missing event. */
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) int munmap(void *addr, size_t len);
__attribute__((visibility("default"))) int munmap(void *addr, size_t len)
{
    return (int)syscall(SYS_munmap, addr, len);
}
