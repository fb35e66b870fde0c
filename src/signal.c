/* Stack overflow detection (design.md §2.4, §6): the SIGSEGV and SIGBUS handler.
 *
 * A task that runs off the bottom of its stack touches the guard page
 * below it (stack.c) and the kernel raises SIGSEGV. The handler cannot run
 * on the overflowed stack, so every M gets an alternate signal stack when
 * its thread starts (gmp__signal_m_init, from mstart), freed by a thread
 * key destructor when the thread ends. The handler asks stack.c whether
 * the faulting address lies in a guard page; if so it prints
 *
 *     gmp: stack overflow in task <id> (stack <lo>-<hi>)
 *
 * and aborts, as Go's "goroutine stack exceeds limit" does. Any other
 * fault is none of ours: it goes to the handler that was installed before
 * gmp_init (the program's own, or a sanitizer's), called as the kernel
 * would have called it; if that was the default action, the handler
 * restores SIG_DFL and returns, so the faulting instruction faults again
 * and the process dies of the signal, as if libgmp were not there (a
 * signal sent with kill(2) is raised again instead).
 *
 * gmp_init installs the handler and gmp_shutdown puts back what it found,
 * unless the program has replaced the handler meanwhile, which leaves the
 * program's in place (and guard faults are then the program's business).
 * Threads that already have an alternate stack (the sanitizers give one to
 * every thread; a program may too) keep theirs.
 *
 * The handler is async-signal-safe: it reads the stack regions and the
 * all-G list lock-free (both only grow while the runtime runs), formats
 * by hand and writes with write(2).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "g.h"
#include "internal.h"
#include "signals.h"
#include "stack.h"
#include "sys.h"

enum { NSIG_HANDLED = 2 };
static const int handled[NSIG_HANDLED] = { SIGSEGV, SIGBUS };

static struct {
	/* The handlers found at install; read by the signal handler, written
	 * only while ours is not installed (and SA_RESETHAND emulation). */
	struct sigaction old[NSIG_HANDLED];
	bool installed; /* api_lock (runtime.c) */
} sig;

/* ---- formatting without stdio --------------------------------------------- */

struct line {
	char buf[256];
	size_t n;
};

static void put_str(struct line *l, const char *s)
{
	while (*s && l->n < sizeof l->buf)
		l->buf[l->n++] = *s++;
}

static void put_uint(struct line *l, uint64_t v, unsigned base)
{
	char tmp[24];
	int i = 0;
	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	if (base == 16)
		put_str(l, "0x");
	while (i > 0 && l->n < sizeof l->buf)
		l->buf[l->n++] = tmp[--i];
}

/* ---- the handler ------------------------------------------------------------ */

/* The task whose stack is [lo, hi): most likely the one running on this
 * thread; otherwise (a stray pointer from elsewhere) whoever owns it. */
static gmp_g *stack_owner(uintptr_t lo)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? gmp__loadp_rlx(&m->curg) : NULL;
	if (g && g->stack.lo == lo)
		return g;
	for (g = gmp__loadp_acq(&gmp__allg); g; g = g->allglink)
		if (g->stack.lo == lo)
			return g;
	return NULL;
}

static _Noreturn void overflow(uintptr_t lo, uintptr_t hi)
{
	struct line l = { .n = 0 };
	gmp_g *g = stack_owner(lo);
	put_str(&l, "gmp: stack overflow in task ");
	if (g)
		put_uint(&l, (uint64_t)g->id, 10);
	else
		put_str(&l, "?");
	put_str(&l, " (stack ");
	put_uint(&l, lo, 16);
	put_str(&l, "-");
	put_uint(&l, hi, 16);
	put_str(&l, ")\n");
	gmp__sys_write(2, l.buf, l.n);
	abort();
}

/* Passes a fault that is not ours to the handler we found at install. */
static void forward(int idx, int signo, siginfo_t *si, void *uc)
{
	struct sigaction *o = &sig.old[idx];
	bool user = o->sa_flags & SA_SIGINFO ||
		    (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN);
	if (!user) {
		/* SIG_IGN cannot hold off a real fault: the kernel would
		 * have killed the process anyway. An ignored kill(2) stays
		 * ignored. */
		if (o->sa_handler == SIG_IGN && si->si_code <= 0)
			return;
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(signo, &dfl, NULL);
		/* A fault re-faults on return; a sent signal must be sent
		 * again (it stays pending until we return). */
		if (si->si_code <= 0)
			raise(signo);
		return;
	}
	/* Run it under the mask it asked for, as the kernel would have. */
	sigset_t mask = ((ucontext_t *)uc)->uc_sigmask;
	sigorset(&mask, &mask, &o->sa_mask);
	if (!(o->sa_flags & SA_NODEFER))
		sigaddset(&mask, signo);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	if (o->sa_flags & SA_SIGINFO) {
		void (*fn)(int, siginfo_t *, void *) = o->sa_sigaction;
		if (o->sa_flags & SA_RESETHAND)
			o->sa_handler = SIG_DFL;
		fn(signo, si, uc);
	} else {
		void (*fn)(int) = o->sa_handler;
		if (o->sa_flags & SA_RESETHAND)
			o->sa_handler = SIG_DFL;
		fn(signo);
	}
}

static void handler(int signo, siginfo_t *si, void *uc)
{
	int saved = errno;
	int idx = signo == SIGSEGV ? 0 : 1;
	uintptr_t lo, hi;
	/* si_code > 0: raised by the kernel for a fault at si_addr. */
	if (si->si_code > 0 &&
	    gmp__stack_guard_hit((uintptr_t)si->si_addr, &lo, &hi))
		overflow(lo, hi);
	forward(idx, signo, si, uc);
	errno = saved;
}

/* gmp_init (api_lock held). */
void gmp__signal_install(void)
{
	if (sig.installed)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < NSIG_HANDLED; i++)
		sigaction(handled[i], &sa, &sig.old[i]);
	sig.installed = true;
}

/* gmp_shutdown (api_lock held): put back what we found, unless the program
 * has installed a handler of its own since. */
void gmp__signal_restore(void)
{
	if (!sig.installed)
		return;
	for (int i = 0; i < NSIG_HANDLED; i++) {
		struct sigaction cur;
		if (sigaction(handled[i], NULL, &cur) == 0 &&
		    (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == handler)
			sigaction(handled[i], &sig.old[i], NULL);
	}
	sig.installed = false;
}

/* ---- alternate signal stacks ---------------------------------------------- */

enum { ALTSTACK_SIZE = 64 * 1024, ALTSTACK_MIN = 16 * 1024 };

static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;
static bool altstack_key_ok;

/* Thread exit: the stack goes, after the kernel has stopped using it. */
static void altstack_free(void *mem)
{
	size_t ps = gmp__pagesize();
	stack_t cur;
	if (sigaltstack(NULL, &cur) == 0 &&
	    (uintptr_t)cur.ss_sp == (uintptr_t)mem + ps) {
		stack_t off = { .ss_flags = SS_DISABLE };
		sigaltstack(&off, NULL);
	}
	munmap(mem, ps + ALTSTACK_SIZE);
}

static void altstack_key_create(void)
{
	altstack_key_ok = pthread_key_create(&altstack_key, altstack_free) == 0;
}

/* mstart, on the new M's thread while every signal is still blocked. If
 * memory for the stack cannot be had, the M goes without: an overflow on
 * it then kills the process with a plain SIGSEGV instead of the message. */
void gmp__signal_m_init(void)
{
	int saved = errno;
	stack_t cur;
	if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) &&
	    cur.ss_size >= ALTSTACK_MIN)
		goto out; /* the thread has one already */
	pthread_once(&altstack_once, altstack_key_create);
	if (!altstack_key_ok)
		goto out;
	size_t ps = gmp__pagesize();
	char *mem = mmap(NULL, ps + ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		goto out;
	/* A guard below it where that costs no mapping; without one, a
	 * handler that overflows this stack runs into whatever lies below. */
	if (gmp__guard_install_works())
		gmp__guard_install(mem, ps);
	stack_t ss = { .ss_sp = mem + ps, .ss_size = ALTSTACK_SIZE };
	if (sigaltstack(&ss, NULL) != 0 ||
	    pthread_setspecific(altstack_key, mem) != 0) {
		stack_t off = { .ss_flags = SS_DISABLE };
		sigaltstack(&off, NULL);
		munmap(mem, ps + ALTSTACK_SIZE);
	}
out:
	errno = saved;
}
