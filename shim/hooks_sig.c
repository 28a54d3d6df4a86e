/* Signal hooks: an application's signal handler never runs inside one of
 * the library's critical sections (SIGDEFER below).
 *
 * --- SIGDEFER -------------------------------------------------------------------
 *
 * send() and recv() are async-signal-safe: a handler may do I/O on a socket.
 * On a paired connection that I/O takes the connection's lock; when the
 * handler interrupted this very thread while it held that lock (in the
 * middle of a ring write), the handler would wait for a lock no one can
 * release.  So every handler the application installs through sigaction(),
 * signal(), bsd_signal() or sysv_signal() is registered with the kernel
 * behind one trampoline of ours (SA_SIGINFO added, SA_RESETHAND done by
 * hand); the application's own disposition is kept here and is what those
 * functions report.  The trampoline runs the handler at once, unless the
 * thread is inside a critical section (shim_sig_crit) and not in one of its
 * blocking waits (shim_sig_open): then it queues the same signal again to
 * this thread with the same siginfo (rt_tgsigqueueinfo), blocks it in the
 * interrupted context's mask (which the kernel restores on return) and
 * notes it; the section's end (shim_sig_release) unblocks it, and the
 * kernel delivers it there as it would have, with the handler's own mask,
 * flags and siginfo.
 *
 * Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) are never
 * deferred.  Handlers installed through raw system calls or sigset() are
 * not wrapped (they run at once, as before).  ZCSOCK_SIGNAL_DEFER=0 turns
 * the wrapping off. */
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "shim_int.h"
#include "zc_config.h"
#include "zc_sys.h"

/* glibc's own entry (public since 2.2.5): reached without dlsym, so it is
 * safe from the first instruction on, and from inside a sanitizer's
 * runtime that forwards its own sigaction interceptor to us. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

sighandler_t bsd_signal(int sig, sighandler_t h);
sighandler_t sysv_signal(int sig, sighandler_t h);
sighandler_t __sysv_signal(int sig, sighandler_t h);

__thread int shim_sig_crit __attribute__((tls_model("initial-exec")));
__thread int shim_sig_open __attribute__((tls_model("initial-exec")));
__thread uint64_t shim_sig_pend __attribute__((tls_model("initial-exec")));
/* Handlers of the application's that ran on this thread (all, and those
 * without SA_RESTART): a wait of ours that sees one of these move since it
 * began must not go to sleep, since the kernel would have interrupted the
 * application's call (shim_wait_signalled, lp_sig_interrupts). */
__thread unsigned shim_sig_ran __attribute__((tls_model("initial-exec")));
__thread unsigned shim_sig_ran_intr __attribute__((tls_model("initial-exec")));

/* The application's disposition of each signal we wrap (handler NULL: not
 * wrapped).  Written under shim_sig_lock; the trampoline reads the handler
 * and flags atomically. */
static struct {
    void (*handler)(int, siginfo_t *, void *);
    int flags;
    sigset_t mask;
} shim_sig_app[_NSIG];
static int shim_sig_lock;

static int shim_sig_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
           sig == SIGTRAP || sig == SIGSYS;
}

static void shim_sig_tramp(int sig, siginfo_t *si, void *uc)
{
    int saved = errno, flags;
    void (*h)(int, siginfo_t *, void *);

    if (shim_sig_crit > 0 && !shim_sig_open && !shim_sig_fault(sig) && uc &&
        zc_syscall(SYS_rt_tgsigqueueinfo, (long)zc_getpid(), (long)zc_syscall(SYS_gettid), (long)sig,
                si) == 0) {
        sigaddset(&((ucontext_t *)uc)->uc_sigmask, sig);
        shim_sig_pend |= 1ull << (sig - 1);
        errno = saved;
        return;
    }
    errno = saved;      /* as the handler would have found it (a failed re-queue) */
    h = __atomic_load_n(&shim_sig_app[sig].handler, __ATOMIC_ACQUIRE);
    flags = __atomic_load_n(&shim_sig_app[sig].flags, __ATOMIC_RELAXED);
    if (!h || h == (void *)SIG_IGN || h == (void *)SIG_DFL)
        return;         /* changed meanwhile (the kernel's disposition follows) */
    if (flags & SA_RESETHAND) {
        struct sigaction dfl;

        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        __atomic_store_n(&shim_sig_app[sig].handler, NULL, __ATOMIC_RELEASE);
        __sigaction(sig, &dfl, NULL);
        errno = saved;
    }
    shim_sig_ran++;
    if (!(flags & SA_RESTART))
        shim_sig_ran_intr++;
    if (flags & SA_SIGINFO)
        h(sig, si, uc);
    else
        ((void (*)(int))(void *)h)(sig);
}

/* The end of the outermost critical section found signals deferred:
 * unblock them (the kernel delivers them now). */
void shim_sig_release(void)
{
    uint64_t p = __atomic_exchange_n(&shim_sig_pend, 0, __ATOMIC_RELAXED);
    sigset_t s;
    int sig;

    sigemptyset(&s);
    for (sig = 1; sig < 64 && sig < _NSIG; sig++)
        if (p & (1ull << (sig - 1))) {
            sigaddset(&s, sig);
            zc_stat_add(ZC_STAT_SIG_DEFERRED, 1);
        }
    zc_syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &s, NULL, _NSIG / 8);
}

static int shim_sig_wrappable(int sig, const struct sigaction *act)
{
    return zc_config.signal_defer && sig > 0 && sig < 64 && sig < _NSIG && sig != SIGKILL &&
           sig != SIGSTOP && act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
           !shim_sig_fault(sig);
}

/* sigaction's work (also signal()'s and the local path's look at the
 * application's dispositions, which do not enter the exported hook). */
int shim_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    struct sigaction k, was_k, was_app;
    int wrapped, rc;

    /* Before our constructor (a sanitizer runtime starting, another
     * library's constructor) nothing is wrapped: no handler of the
     * application's can be inside one of our critical sections yet. */
    if (!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE) || sig <= 0 || sig >= 64 ||
        sig >= _NSIG || shim_vfork_child())
        return __sigaction(sig, act, old);
    shim_sig_crit++;            /* a handler of this thread's waits for the table */
    while (__atomic_exchange_n(&shim_sig_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    wrapped = shim_sig_app[sig].handler != NULL;
    memset(&was_app, 0, sizeof(was_app));
    if (wrapped) {
        was_app.sa_sigaction = shim_sig_app[sig].handler;
        was_app.sa_flags = shim_sig_app[sig].flags;
        was_app.sa_mask = shim_sig_app[sig].mask;
    }
    if (act && shim_sig_wrappable(sig, act)) {
        k = *act;
        k.sa_sigaction = shim_sig_tramp;
        k.sa_flags = (act->sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
        __atomic_store_n(&shim_sig_app[sig].flags, act->sa_flags, __ATOMIC_RELAXED);
        shim_sig_app[sig].mask = act->sa_mask;
        __atomic_store_n(&shim_sig_app[sig].handler, act->sa_sigaction, __ATOMIC_RELEASE);
        rc = __sigaction(sig, &k, &was_k);
        if (rc < 0) {           /* put back what stood */
            __atomic_store_n(&shim_sig_app[sig].flags, was_app.sa_flags, __ATOMIC_RELAXED);
            shim_sig_app[sig].mask = was_app.sa_mask;
            __atomic_store_n(&shim_sig_app[sig].handler, wrapped ? was_app.sa_sigaction : NULL,
                             __ATOMIC_RELEASE);
        }
    } else {
        rc = __sigaction(sig, act, &was_k);
        if (rc == 0 && act)
            __atomic_store_n(&shim_sig_app[sig].handler, NULL, __ATOMIC_RELEASE);
    }
    if (rc == 0 && old) {
        *old = was_k;
        if (wrapped && was_k.sa_sigaction == shim_sig_tramp) {
            /* The application's handler, flags and mask, with what glibc
             * and the kernel add to every disposition kept as they report
             * it (SA_RESTORER and sa_restorer on x86_64). */
            int ours = (was_app.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;

            old->sa_sigaction = was_app.sa_sigaction;
            old->sa_mask = was_app.sa_mask;
            old->sa_flags = was_app.sa_flags | (was_k.sa_flags & ~ours);
        }
    }
    __atomic_store_n(&shim_sig_lock, 0, __ATOMIC_RELEASE);
    if (--shim_sig_crit == 0 && shim_unlikely(shim_sig_pend))
        shim_sig_release();
    return rc;
}

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return shim_sigaction(sig, act, old);
}

/* signal() and its relatives, as glibc makes them, through our sigaction. */
static sighandler_t shim_sig_set(int sig, sighandler_t h, int flags, int mask_self)
{
    struct sigaction act, old;

    if (h == SIG_ERR || sig <= 0 || sig >= _NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    memset(&act, 0, sizeof(act));
    act.sa_handler = h;
    sigemptyset(&act.sa_mask);
    if (mask_self)
        sigaddset(&act.sa_mask, sig);
    act.sa_flags = flags;
    if (shim_sigaction(sig, &act, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}

SHIM_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
    return shim_sig_set(sig, h, SA_RESTART, 1);
}

SHIM_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
    return shim_sig_set(sig, h, SA_RESTART, 1);
}

SHIM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
    return shim_sig_set(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}

SHIM_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
    return shim_sig_set(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}
