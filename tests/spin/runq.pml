/* The per-P run queue of src/runq.h and src/runq.c, as a Promela model for
 * the SPIN model checker: one owner P that puts (into runnext, kicking the
 * old runnext to the ring, or at the tail, overflowing half the ring to the
 * global queue when it is full) and gets, against two thieves that steal
 * half the ring, or runnext on their last attempt. SPIN explores every
 * interleaving of their steps and checks that no G is ever taken twice
 * (an assertion at every take) and that, when everyone is done, every G is
 * in exactly one place: taken by the owner or a thief, in the global
 * queue, or still in the ring or runnext (no G lost).
 *
 * Fidelity. Each shared access of the C code is one atomic step here: the
 * loads of runqhead and runqtail, the store of runqtail, every slot read
 * and write, and the CASes on runqhead and runnext. A thief copies the
 * slots one by one, so the owner may overwrite a slot between the copies
 * (the thief's head CAS must then fail). The C code's acquire/release
 * orders are modelled as sequential consistency: this model checks the
 * protocol (which index moves when, what each CAS guards), not the choice
 * of memory orders, which src/runq.h argues pairwise. The indices of the C
 * code are free-running uint32 counters; here they are bytes that never
 * wrap (the runs are short), which the C code's unsigned differences make
 * equivalent. The usleep(3) before stealing runnext only delays the thief,
 * which the interleavings cover.
 *
 * Sizes: a ring of RING (4) slots holding PREFILL Gs at the start, then
 * NOWNER operations of the owner, each a put into runnext, a put at the
 * tail or a get, in every order SPIN can choose, with NG Gs in all; two
 * thieves of NSTEAL attempts each. tests/spin/check runs several such
 * configurations exhaustively.
 *
 * Mutants. Compiled with -DBUG_GET_PLAIN_STORE (the owner's get advances
 * head with a store instead of a CAS), -DBUG_PUTSLOW_PLAIN_STORE (the same
 * in the overflow path), -DBUG_STEAL_PLAIN_STORE (a thief commits its
 * steal without checking head) or -DBUG_STEAL_RUNNEXT_PLAIN_STORE (a thief
 * clears runnext without a CAS), the model must fail: tests/spin/check
 * makes sure each does, so that a model too weak to catch a real race
 * cannot pass silently.
 */

#ifndef RING
#define RING 4
#endif
#ifndef NG
#define NG 6
#endif
#ifndef NSTEAL
#define NSTEAL 1   /* steal attempts per thief; the last may take runnext */
#endif
#ifndef NOWNER
#define NOWNER 4   /* owner operations at most (puts and gets) */
#endif
#ifndef PREFILL
#define PREFILL 3  /* Gs in the ring before anyone starts */
#endif

byte head, tail;           /* runqhead, runqtail */
byte slot[RING];           /* runq[]; G ids, 0 is empty/garbage */
byte runnext;

byte taken[NG + 1];        /* G g was taken to run (owner or thief) */
byte inglobal[NG + 1];     /* G g went to the global queue */

/* Forgets an operation's locals, so that states differing only in dead
 * values are one state (a large reduction). */
inline forget()
{
	d_step {
		h = 0; t = 0; n = 0; i = 0; nx = 0; ok = 0;
		batch[0] = 0; batch[1] = 0
	}
}

inline take(g)
{
	assert(g >= 1 && g <= NG);
	assert(taken[g] == 0 && inglobal[g] == 0); /* never twice */
	taken[g] = 1
}

/* ---- the owner ------------------------------------------------------- */

/* gmp__runq_putslow: the ring is full; move its first half and g to the
 * global queue, unless a thief moved head meanwhile (then retry). */
inline putslow(g, h, t, ok)
{
	assert(t - h == RING);       /* "runq_putslow: queue is not full" */
	d_step { n = (t - h) / 2; i = 0 };
	do
	:: i < n -> atomic { batch[i] = slot[(h + i) % RING]; i++ }
	:: else -> break
	od;
	atomic {
		if
#ifdef BUG_PUTSLOW_PLAIN_STORE
		:: true -> head = h + n; ok = 1
#else
		:: head == h -> head = h + n; ok = 1
#endif
		:: else -> ok = 0
		fi
	}
	if
	:: ok ->
		/* under sched.lock: the batch and g join the global queue */
		atomic {
			i = 0;
			do
			:: i < n ->
				assert(batch[i] >= 1 && batch[i] <= NG);
				assert(inglobal[batch[i]] == 0 && taken[batch[i]] == 0);
				inglobal[batch[i]] = 1; i++
			:: else -> break
			od;
			assert(inglobal[g] == 0 && taken[g] == 0);
			inglobal[g] = 1
		}
	:: else -> skip
	fi
}

/* gmp__runq_put */
inline put(g0, next)
{
	g = g0;
	if
	:: next ->
		do
		:: old = runnext;
			atomic {
				if
				:: runnext == old -> runnext = g; g = old; break
				:: else -> skip
				fi
			}
		od           /* g: the old runnext, kicked to the tail */
	:: else -> skip
	fi;
	if
	:: g == 0 -> skip
	:: else ->
		do
		/* load-acquire of head; tail is the owner's own (it is its
		 * only writer), so reading it is no separate step */
		:: atomic { h = head; t = tail };
			if
			:: t - h < RING ->
				/* The slot, then tail (store-release): one step,
				 * as no thief reads slot t before it has read
				 * the new tail. */
				atomic { slot[t % RING] = g; tail = t + 1 };
				break
			:: else ->
				putslow(g, h, t, ok);
				if
				:: ok -> break
				:: else -> skip    /* a thief made room */
				fi
			fi
		od
	fi
}

/* gmp__runq_get */
inline get()
{
	nx = runnext;
	atomic {
		if
		:: nx != 0 && runnext == nx -> runnext = 0; ok = 1
		:: else -> ok = 0
		fi
	}
	if
	:: ok -> take(nx)
	:: else ->
		do
		/* head, then the owner's own tail and slot: one step */
		:: atomic { h = head; t = tail; gg = slot[h % RING] };
			if
			:: t == h -> break         /* empty */
			:: else ->
				atomic {
					if
#ifdef BUG_GET_PLAIN_STORE
					:: true -> head = h + 1; ok = 1
#else
					:: head == h -> head = h + 1; ok = 1
#endif
					:: else -> ok = 0
					fi
				}
				if
				:: ok -> take(gg); break
				:: else -> skip
				fi
			fi
		od
	fi
}

proctype owner()
{
	byte g, old, h, t, n, i, nx, gg, ok, ops;
	byte batch[RING / 2];
	byte nextg = PREFILL + 1;
	do
	:: ops < NOWNER && nextg <= NG ->
		put(nextg, 1); skip; d_step { nextg++; ops++; g = 0; old = 0; gg = 0 }; forget()
	:: ops < NOWNER && nextg <= NG ->
		put(nextg, 0); skip; d_step { nextg++; ops++; g = 0; old = 0; gg = 0 }; forget()
	:: ops < NOWNER -> get(); skip; d_step { ops++; gg = 0 }; forget()
	:: ops >= NOWNER || nextg > NG -> break
	od;
	/* Whatever was not put yet never existed for the thieves; count it
	 * as taken so the final check need not special-case it. */
	skip;
	d_step {
		do
		:: nextg <= NG -> taken[nextg] = 1; nextg++
		:: else -> break
		od
	}
}

/* ---- a thief ------------------------------------------------------------ */

/* runq_grab + gmp__runq_steal: copy up to half the ring, commit with the
 * head CAS; on the last attempt an empty ring gives up its runnext. */
proctype thief()
{
	byte h, t, n, i, nx, ok, attempt;
	byte batch[RING / 2];
	attempt = 0;
	do
	:: attempt < NSTEAL ->
		do
		:: h = head;                       /* load-acquire */
			atomic {                   /* load-acquire */
				t = tail;
				n = t - h;
				n = n - n / 2
			}
			if
			:: n == 0 ->
				if
				:: attempt == NSTEAL - 1 ->  /* steal_runnext */
					nx = runnext;
					if
					:: nx != 0 ->
						atomic {
							if
#ifdef BUG_STEAL_RUNNEXT_PLAIN_STORE
							:: true -> runnext = 0; ok = 1
#else
							:: runnext == nx -> runnext = 0; ok = 1
#endif
							:: else -> ok = 0
							fi
						}
						if
						:: ok -> take(nx); break
						:: else -> skip  /* retry */
						fi
					:: else -> break
					fi
				:: else -> break
				fi
			:: n > RING / 2 -> skip            /* torn read: retry */
			:: else ->
				i = 0;
				do
				:: i < n -> atomic { batch[i] = slot[(h + i) % RING]; i++ }
				:: else -> break
				od;
				atomic {
					if
#ifdef BUG_STEAL_PLAIN_STORE
					:: true -> head = h + n; ok = 1
#else
					:: head == h -> head = h + n; ok = 1
#endif
					:: else -> ok = 0
					fi
				}
				if
				:: ok ->
					atomic {
						i = 0;
						do
						:: i < n -> take(batch[i]); i++
						:: else -> break
						od
					}
					break
				:: else -> skip
				fi
			fi
		od;
		attempt++;
		forget()
	:: else -> break
	od
}

/* ---- the whole -------------------------------------------------------------- */

init
{
	byte g, i, inq;
	atomic {
		/* The owner has already put Gs 1..PREFILL at the tail. */
		g = 1;
		do
		:: g <= PREFILL -> slot[g - 1] = g; g++
		:: else -> break
		od;
		tail = PREFILL;
		run owner();
		run thief();
		run thief()
	}
	(_nr_pr == 1);                 /* everyone is done */
	/* No G lost, none duplicated: each is in exactly one place. */
	d_step {
	g = 1;
	do
	:: g <= NG ->
		inq = (runnext == g);
		i = head;
		do
		:: i < tail -> inq = inq + (slot[i % RING] == g); i++
		:: else -> break
		od;
		assert(taken[g] + inglobal[g] + inq == 1);
		g++
	:: else -> break
	od
	}
}
