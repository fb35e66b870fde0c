/* Detaching a P from a task that runs past its slice (design.md §13 and
 * §37), as a Promela model for SPIN.
 *
 * Three parties share one P:
 *
 *   Task    the thread of a task that holds the P. It runs its own code,
 *           then calls into the runtime: it marks "in the runtime" with a
 *           plain store (g->inrt), reads the task's detach word, and only
 *           then uses its P; on the way out it marks "in its own code"
 *           again (a store-release). It never uses a read-modify-write on
 *           this fast path. If the detach word is not NONE it takes the
 *           slow path: refuse a claim (CAS CLAIM -> NONE), wait out
 *           TAKING, or, DETACHED, take a P from the idle list.
 *   Sysmon  claims the task (CAS NONE -> CLAIM), issues the asymmetric
 *           barrier (membarrier), reads the mark, and either backs off
 *           (CAS CLAIM -> NONE: the thread is in the runtime) or commits
 *           (CAS CLAIM -> TAKING), takes the P from the M, publishes
 *           DETACHED and hands the P off (here: onto the idle list).
 *   Other   a third M that takes the P from the idle list, uses it and
 *           puts it back, as handoffp's M and any spinning M would.
 *
 * Memory model. The Task's stores go through a store buffer (a FIFO that
 * a separate process drains one entry at a time, at any moment): that is
 * x86's TSO, where a load may pass an earlier store to another address,
 * which is exactly the reordering that would let the Task read "no
 * claim" while its "in the runtime" store is still invisible to Sysmon.
 * A read-modify-write by the Task drains its buffer first (x86's locked
 * instructions do). membarrier is modelled as what it guarantees: every
 * thread running at the time passes a full barrier, i.e. the Task's
 * buffer is drained, before Sysmon's next read. Sysmon's and Other's own
 * stores are not buffered (their reads of the Task's state are what
 * matters). On arm64 the C code additionally relies on the store-release
 * of the exit mark and the load-acquire of the detach word, which keep
 * the P accesses inside the window; this model checks the protocol, the
 * comments in src/preempt.c argue the orders.
 *
 * Checked: the P is used by at most one party at any instant (every use
 * asserts it is the owner and alone), and when all are done the P is in
 * exactly one place (with the Task, attached, or on the idle list with
 * the Task detached): none lost. And Sysmon detaches only the slice it
 * judged: it reads the P's schedtick at its racy look and checks it again
 * after the barrier, while a Task call may end the slice (a plain store
 * of the schedtick inside the runtime, through the store buffer), so a
 * task that answered in the meantime, or the next one, is never taken for
 * the one that ran too long (sysmon judges a slice a while before it
 * detaches, and may lose its CPU in between).
 *
 * Reachability: -DREACH_DETACH and -DREACH_REACQUIRE assert false where
 * Sysmon commits a detach and where the detached Task takes a P back, so
 * tests/spin/check can make sure the model really gets there (a model in
 * which nothing is ever detached would pass vacuously).
 *
 * Mutants, each of which must fail (tests/spin/check): BUG_NO_MEMBARRIER
 * (Sysmon reads the mark without the barrier), BUG_SYSMON_PLAIN_COMMIT
 * (Sysmon commits with a store, not a CAS), BUG_TASK_PLAIN_REFUSE (the
 * Task refuses a claim with a store, not a CAS), BUG_TASK_NO_CHECK (the
 * Task uses its P without reading the detach word), BUG_NO_TICK_CHECK
 * (Sysmon does not look at the schedtick again after the barrier).
 */

#ifndef NT
#define NT 3   /* the Task's calls into the runtime */
#endif
#ifndef NS
#define NS 2   /* Sysmon's attempts at detaching */
#endif
#ifndef NO
#define NO 2   /* the Other M's attempts at taking the idle P */
#endif

/* The detach word (g->detach). */
#define NONE 0
#define CLAIM 1
#define TAKING 2
#define DETACHED 3

/* Owners of the P. */
#define NOBODY 0
#define TASK 1
#define SYSMON 2
#define OTHER 3

byte inrt = 0;          /* the Task's mark, as memory holds it: 0 while
                           it runs its own code */
byte tick = 0;          /* the P's schedtick, as memory holds it */
byte slice = 0;         /* the slice the Task is in (its own view, which
                           its buffered stores reach memory from) */
byte judged;            /* the schedtick Sysmon judged too long */
byte det = NONE;        /* the detach word */
byte owner = TASK;      /* who holds the P */
bool pidle = false;     /* the P is on the idle list */
byte inuse = 0;         /* parties using the P right now */
byte ndone = 0;

/* The Task's store buffer: (variable, value) pairs, FIFO. */
#define INRT 0
#define TICK 1
chan sb = [4] of { byte, byte };

/* One use of the P by party `who`: it must hold it and be alone. Two
 * steps, so that two overlapping uses are an interleaving SPIN sees. */
inline use_p(who)
{
	atomic { assert(owner == who); inuse++; assert(inuse == 1) };
	inuse--
}

/* The Task's store buffer drains one entry at a time, whenever. */
inline drain_one()
{
	sb?v,x;
	if
	:: v == INRT -> inrt = x
	:: else -> tick = x
	fi
}

active proctype Drain()
{
	byte v, x;
end:	do
	:: atomic { nempty(sb) -> drain_one() }
	od
}

proctype Task()
{
	byte d, n = 0;
	do
	:: n < NT ->
		/* Its own code ran; now a call into the runtime that needs
		 * its P. The mark (plain store) goes into the buffer, and the
		 * load of the detach word may overtake it. */
		sb!INRT,1;
#ifdef BUG_TASK_NO_CHECK
		d = NONE;
#else
		d = det;
#endif
check:		if
		:: d == NONE -> skip
		:: d == CLAIM ->
			/* refuse: CAS CLAIM -> NONE (drains the buffer) */
			atomic {
				empty(sb) ->
#ifdef BUG_TASK_PLAIN_REFUSE
				det = NONE;
#else
				if
				:: det == CLAIM -> det = NONE
				:: else -> skip
				fi;
#endif
				d = det
			};
			goto check
		:: d == TAKING ->
			/* Sysmon is taking the P: a few of its stores */
			(det != TAKING);
			d = det;
			goto check
		:: d == DETACHED ->
			/* the slow path: a P from the idle list (the C code
			 * queues the task and parks the M until one is handed
			 * to it, which is this wait), then NONE by a CAS */
			atomic { pidle -> pidle = false; owner = TASK };
#ifdef REACH_REACQUIRE
			assert(false);
#endif
			/* a P taken back starts a new slice */
			slice++;
			sb!TICK,slice;
			atomic { empty(sb) -> det = NONE };
			d = NONE
		fi;
		use_p(TASK);
		/* The call may end the slice (a yield, a park: the scheduler
		 * runs the next one), with a plain store of the P's schedtick,
		 * inside the runtime. */
		if
		:: slice++; sb!TICK,slice
		:: skip
		fi;
		/* back to its own code: store-release of the mark */
		sb!INRT,0;
		n++
	:: else -> break
	od;
	ndone++
}

proctype Sysmon()
{
	byte u, v, x, n = 0;
	bool ok;
	do
	:: n < NS ->
		n++;
		/* Racy look (the slice has lasted too long): the P is held
		 * by the task's M and nobody claims the task; the slice is
		 * the P's schedtick as read now. */
		if
		:: owner == TASK && det == NONE -> judged = tick
		:: else -> goto next
		fi;
		atomic {
			if
			:: det == NONE -> det = CLAIM; ok = true
			:: else -> ok = false
			fi
		};
		if
		:: !ok -> goto next
		:: else -> skip
		fi;
#ifndef BUG_NO_MEMBARRIER
		/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) */
		atomic {
			do
			:: nempty(sb) -> drain_one()
			:: empty(sb) -> break
			od
		};
#endif
		u = inrt;
#ifndef BUG_NO_TICK_CHECK
		/* With the thread in its own code, the P's schedtick holds
		 * still: another slice than the one judged backs off too. */
		if
		:: u == 0 && tick != judged -> u = 1
		:: else -> skip
		fi;
#endif
		if
		:: u != 0 ->
			/* in the runtime: back off (CAS CLAIM -> NONE) */
			atomic {
				if
				:: det == CLAIM -> det = NONE
				:: else -> skip
				fi
			}
		:: u == 0 ->
			atomic {
#ifdef BUG_SYSMON_PLAIN_COMMIT
				det = TAKING; ok = true
#else
				if
				:: det == CLAIM -> det = TAKING; ok = true
				:: else -> ok = false
				fi
#endif
			};
			if
			:: ok ->
#ifdef REACH_DETACH
				assert(false);
#endif
				/* The task detached is the one judged. */
				assert(slice == judged);
				/* takep: m->p, p->m, the P's status */
				atomic {
					assert(owner == TASK);
					owner = SYSMON;
					inuse++;
					assert(inuse == 1)
				};
				inuse--;
				det = DETACHED;   /* store-release */
				/* handoffp: the P goes to another M, here by
				 * way of the idle list */
				atomic { owner = NOBODY; pidle = true }
			:: else -> skip
			fi
		fi;
next:		skip
	:: else -> break
	od;
	ndone++
}

proctype Other()
{
	byte n = 0;
	bool got;
	do
	:: n < NO ->
		n++;
		atomic {
			if
			:: pidle -> pidle = false; owner = OTHER; got = true
			:: else -> got = false
			fi
		};
		if
		:: got ->
			use_p(OTHER);
			atomic { owner = NOBODY; pidle = true }
		:: else -> skip
		fi
	:: else -> break
	od;
	ndone++
}

init
{
	byte v, x;
	atomic { run Task(); run Sysmon(); run Other() };
	(ndone == 3);
	atomic {
		do
		:: nempty(sb) -> drain_one()
		:: empty(sb) -> break
		od
	};
	assert(inuse == 0);
	/* No P lost, none held twice: attached to the task, or idle with
	 * the task detached. */
	assert((owner == TASK && !pidle && det == NONE) ||
	       (owner == NOBODY && pidle && det == DETACHED))
}
