/* The runtime semaphore (see sema.h), after Go's runtime/sema.go.
 *
 * The count lives in the caller's word; sleepers live in semtable, a fixed
 * array of roots picked by hashing the word's address. A root holds, under
 * its lock, every sleeper on every address that hashes to it:
 *
 *   - one tree node per distinct address: a treap (a binary search tree on
 *     the address that is also a min-heap on a random priority, so it stays
 *     balanced on average without rebalancing code), so finding an address
 *     costs O(log k) for k distinct addresses asleep in the root;
 *   - behind each node, the other sleepers on the same address in a FIFO
 *     line (waitlink/waittail), so queueing and dequeueing on one address
 *     are O(1) however many sleep on it. Go learnt the need for this second
 *     level the hard way (golang/go#17953): a flat list per root made
 *     thousands of sleepers on one address quadratic.
 *
 * The waiter record (struct semwaiter) lives on the sleeper's stack for the
 * duration of the sleep: the runtime allocates nothing.
 *
 * Lost wakeups. A sleeper must not go to sleep after a release it missed.
 * The release side increments the count and then reads the root's nwait
 * without taking the lock (the fast path that makes releasing an
 * uncontended semaphore one atomic and one load); the acquire side, under
 * the lock, increments nwait and then tries the count once more before it
 * sleeps. Both increments are full (#StoreLoad) read-modify-writes, so at
 * least one side sees the other's increment: either the releaser sees
 * nwait > 0 and takes the lock (which orders it after the sleeper's
 * queueing), or the sleeper sees the count and does not sleep.
 *
 * Handoff. A plain release only wakes the sleeper, who then competes for
 * the count with whoever arrives meanwhile (and may lose and sleep again).
 * A handoff release takes the count on the sleeper's behalf before waking
 * it (semwaiter.handoff), and then, when both are tasks, yields so that the
 * sleeper (readied into this P's runnext) runs at once, inheriting the
 * time slice. gmp_mutex uses it in starvation mode.
 */
#include <string.h>

#include "export_test.h"
#include "preempt.h"
#include "sema.h"
#include "wait.h"

/* A prime, so that addresses with a common stride do not pile into a few
 * roots. */
#define SEMTAB_SIZE 251

typedef struct semwaiter semwaiter;
struct semwaiter {
	gmp__waiter w;           /* how it sleeps and is woken */
	volatile uint32_t *addr; /* the semaphore it waits on */
	/* Tree links and priority: only the head of each address's line is in
	 * the tree; the others have them NULL. Root lock. */
	semwaiter *parent, *left, *right;
	uint32_t prio;
	/* The line of sleepers on addr, oldest first: waitlink is the next
	 * one; waittail (meaningful in the head only) the last, NULL when the
	 * head is alone. Root lock. */
	semwaiter *waitlink, *waittail;
	/* Set by a handoff release before the wake: the count was taken for
	 * us. Written by the waker, read by the sleeper after the wake
	 * (gmp__waiter_wake's release store is the partner of the sleeper's
	 * acquire of the waiter state). */
	bool handoff;
};

typedef struct semroot {
	gmp__mutex lock;
	/* Sleepers queued in this root, all addresses together. Incremented
	 * under the lock (full, see the top comment); decremented under the
	 * lock; read without it by gmp__semrelease's fast path. */
	volatile uint32_t nwait;
	semwaiter *tree; /* treap of line heads; lock */
	uint32_t rand;   /* priority generator state; lock */
} semroot;

/* One root per cache line, so releases on unrelated semaphores do not
 * bounce each other's line. */
static struct {
	_Alignas(GMP__CACHELINE) semroot root;
} semtable[SEMTAB_SIZE];

static inline semroot *root_for(volatile uint32_t *addr)
{
	/* Words are at least 4-byte aligned and semaphores usually sit in
	 * 8-byte aligned structures: drop the bits that never vary. */
	return &semtable[((uintptr_t)addr >> 3) % SEMTAB_SIZE].root;
}

static void root_unlock(void *root)
{
	gmp__unlock(&((semroot *)root)->lock);
}

/* A well-mixed priority (a Weyl sequence through a bijective mixer); only
 * its randomness matters, for the treap's balance. Root lock. */
static uint32_t next_prio(semroot *root)
{
	uint32_t x = root->rand += 0x9e3779b9u;
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return x;
}

/* ---- the treap (root lock held throughout) -------------------------------- */

/* Makes whatever pointed at old (its parent's child link, or the tree
 * root) point at new instead. */
static void relink(semroot *root, semwaiter *parent, semwaiter *old,
		   semwaiter *new)
{
	if (!parent)
		root->tree = new;
	else if (parent->left == old)
		parent->left = new;
	else if (parent->right == old)
		parent->right = new;
	else
		gmp__throw("semtable: node %p is not a child of its parent %p",
			   (void *)old, (void *)parent);
}

/* x's right child y takes x's place, x becoming y's left child:
 * (x a (y b c)) -> (y (x a b) c). Order on addresses is preserved. */
static void rotate_left(semroot *root, semwaiter *x)
{
	semwaiter *p = x->parent, *y = x->right, *b = y->left;
	y->left = x;
	x->parent = y;
	x->right = b;
	if (b)
		b->parent = x;
	y->parent = p;
	relink(root, p, x, y);
}

/* The mirror image: (y (x a b) c) -> (x a (y b c)). */
static void rotate_right(semroot *root, semwaiter *y)
{
	semwaiter *p = y->parent, *x = y->left, *b = x->right;
	x->right = y;
	y->parent = x;
	y->left = b;
	if (b)
		b->parent = y;
	x->parent = p;
	relink(root, p, y, x);
}

/* s, waiting on the same address as old, takes old's node in the tree
 * (links and priority), so the tree's shape does not change. */
static void substitute(semroot *root, semwaiter *old, semwaiter *s)
{
	s->parent = old->parent;
	s->left = old->left;
	s->right = old->right;
	s->prio = old->prio;
	if (s->left)
		s->left->parent = s;
	if (s->right)
		s->right->parent = s;
	relink(root, old->parent, old, s);
	old->parent = old->left = old->right = NULL;
}

static semwaiter *find(semroot *root, volatile uint32_t *addr)
{
	semwaiter *t = root->tree;
	while (t && t->addr != addr)
		t = (uintptr_t)addr < (uintptr_t)t->addr ? t->left : t->right;
	return t;
}

/* Puts s in addr's line: at the back, or with lifo at the front. */
static void queue(semroot *root, volatile uint32_t *addr, semwaiter *s,
		  bool lifo)
{
	s->addr = addr;
	s->parent = s->left = s->right = NULL;
	s->waitlink = s->waittail = NULL;
	s->handoff = false;

	semwaiter *last = NULL, **link = &root->tree;
	for (semwaiter *t = *link; t; t = *link) {
		if (t->addr == addr) {
			if (lifo) {
				/* s becomes the head: it takes t's node, and t
				 * heads the rest of the line behind it. */
				substitute(root, t, s);
				s->waitlink = t;
				s->waittail = t->waittail ? t->waittail : t;
				t->waittail = NULL;
			} else {
				if (t->waittail)
					t->waittail->waitlink = s;
				else
					t->waitlink = s;
				t->waittail = s;
			}
			return;
		}
		last = t;
		link = (uintptr_t)addr < (uintptr_t)t->addr ? &t->left
							    : &t->right;
	}

	/* A new address: a leaf with a random priority, rotated up until its
	 * parent's priority is no greater (the heap order). */
	s->prio = next_prio(root);
	s->parent = last;
	*link = s;
	while (s->parent && s->parent->prio > s->prio) {
		if (s->parent->left == s)
			rotate_right(root, s->parent);
		else
			rotate_left(root, s->parent);
	}
}

/* Takes the oldest sleeper off addr's line, or returns NULL. */
static semwaiter *dequeue(semroot *root, volatile uint32_t *addr)
{
	semwaiter *s = find(root, addr);
	if (!s)
		return NULL;
	semwaiter *t = s->waitlink;
	if (t) {
		/* The next in line inherits the node and the line's tail. */
		substitute(root, s, t);
		t->waittail = t->waitlink ? s->waittail : NULL;
	} else {
		/* The last sleeper on addr: rotate its node down (keeping the
		 * heap order: the child with the smaller priority rises) until
		 * it is a leaf, then cut it off. */
		while (s->left || s->right) {
			if (!s->right ||
			    (s->left && s->left->prio < s->right->prio))
				rotate_right(root, s);
			else
				rotate_left(root, s);
		}
		relink(root, s->parent, s, NULL);
		s->parent = NULL;
	}
	s->waitlink = s->waittail = NULL;
	return s;
}

/* ---- acquire and release --------------------------------------------------- */

bool gmp__cansemacquire(volatile uint32_t *addr)
{
	for (;;) {
		uint32_t v = gmp__load32_rlx(addr);
		if (v == 0)
			return false;
		/* acquire: pairs with the full increment in gmp__semrelease,
		 * so what the releaser wrote before releasing is visible to
		 * whoever takes the count. */
		if (gmp__cas32_acq(addr, v, v - 1))
			return true;
	}
}

void gmp__semacquire(volatile uint32_t *addr, bool lifo, uint32_t reason)
{
	if (gmp__cansemacquire(addr))
		return;

	/* A runtime thread with no task is on its scheduler stack (an unlock
	 * function, a timer): sleeping there would stall its P for good. */
	gmp__m *m = gmp__getm();
	if (m && !m->curg)
		gmp__throw("semacquire of %p on the scheduler stack (M %lld)",
			   (void *)addr, (long long)m->id);

	/* Sleeping parks a task: inside the runtime (preempt.h), entered
	 * before any lock. */
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	semroot *root = root_for(addr);
	semwaiter s;
	for (;;) {
		gmp__waiter_init_as(&s.w, g); /* g's M may change each round */
		gmp__lock(&root->lock);
		/* full: the #StoreLoad between announcing ourselves and the
		 * last look at the count; the partner is the full increment
		 * of the count in gmp__semrelease, before its nwait load. */
		gmp__add32_full(&root->nwait, 1);
		if (gmp__cansemacquire(addr)) {
			/* relaxed: under the lock; the releaser's lock-free
			 * read may see the old value and take the lock for
			 * nothing, which is harmless. */
			gmp__add32_rlx(&root->nwait, -1);
			gmp__unlock(&root->lock);
			break;
		}
		queue(root, addr, &s, lifo);
		/* The lock drops once we are committed to sleeping (for a
		 * task: off its stack), so a releaser that finds us cannot
		 * wake us before we sleep. The releaser takes us off the
		 * line, so there is nothing to clean up on return. */
		gmp__waiter_sleep(&s.w, root_unlock, root, reason, -1);
		if (s.handoff || gmp__cansemacquire(addr))
			break;
		/* Someone arriving took the count first: sleep again, at the
		 * same end of the line as before. */
	}
	gmp__leave_task(g, was);
}

static void release_one(semroot *root, volatile uint32_t *addr, bool handoff,
			gmp_g *self);

void gmp__semrelease(volatile uint32_t *addr, bool handoff)
{
	semroot *root = root_for(addr);
	/* full: publishes the caller's writes to the acquirer's CAS in
	 * gmp__cansemacquire, and is the #StoreLoad before the nwait load
	 * (partner: the full nwait increment in gmp__semacquire). */
	gmp__add32_full(addr, 1);
	if (gmp__load32_rlx(&root->nwait) == 0)
		return;
	/* Waking readies a task into our P: inside the runtime (preempt.h),
	 * entered before the lock. */
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	release_one(root, addr, handoff, g);
	gmp__leave_task(g, was);
}

/* gmp__semrelease's slow half: wake the oldest sleeper on addr, if any. */
static void release_one(semroot *root, volatile uint32_t *addr, bool handoff,
			gmp_g *self)
{
	gmp__lock(&root->lock);
	if (gmp__load32_rlx(&root->nwait) == 0) {
		/* Whoever was waiting consumed the count on its own. */
		gmp__unlock(&root->lock);
		return;
	}
	semwaiter *s = dequeue(root, addr);
	if (s)
		gmp__add32_rlx(&root->nwait, -1); /* under the lock */
	gmp__unlock(&root->lock);
	if (!s)
		return; /* the sleepers in this root wait on other words */

	/* s is off the line and still asleep: it is ours until we wake it. */
	if (GMP__DEBUG && s->handoff)
		gmp__throw("semrelease: sleeper on %p already has the count",
			   (void *)addr);
	bool handed = handoff && gmp__cansemacquire(addr);
	bool to_task = s->w.g != NULL;
	s->handoff = handed;
	if (!gmp__waiter_claim(&s->w))
		gmp__throw("semrelease: sleeper on %p timed out (no deadline)",
			   (void *)addr);
	gmp__waiter_wake_by(&s->w, self); /* s may be gone from here */
	/* The sleeper sits in our runnext (when we are a task on a P):
	 * yield so it runs now, in our slice. Only for a handoff: otherwise
	 * someone else could take the count while we switch, for nothing.
	 * gmp_yield does nothing outside a task or in a syscall window. */
	if (handed && to_task)
		gmp_yield();
}

#if GMP__TEST_HOOKS
uint32_t gmp__sema_nwaiters(volatile uint32_t *addr)
{
	semroot *root = root_for(addr);
	uint32_t n = 0;
	gmp__lock(&root->lock);
	for (semwaiter *s = find(root, addr); s; s = s->waitlink)
		n++;
	gmp__unlock(&root->lock);
	return n;
}
#endif

/* fork.c: in the child, forget every sleeper: they are the parent's
 * threads and tasks, which do not exist here (a release must not wake
 * one). */
void gmp__sema_forked(void)
{
	memset(semtable, 0, sizeof semtable);
}
