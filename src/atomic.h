/* The only door to atomic operations in libgmp (design.md §40).
 *
 * Everything goes through libatomic_ops (AO), and every operation names its
 * memory order in its own name, because AO's unsuffixed operations are
 * relaxed on arm64 while being full barriers on x86: a missing order would
 * pass every test on an x86 host (qemu-user included) and break on real
 * arm64 hardware.
 *
 *   _rlx   relaxed: atomicity only, no ordering
 *   _acq   load-acquire / acquiring RMW: later accesses stay after it
 *   _rel   store-release / releasing RMW: earlier accesses stay before it
 *   _full  sequentially consistent RMW: also a #StoreLoad barrier; this is
 *          what the spinning-M protocol and Dekker-style checks rely on
 *
 * There is deliberately no free-standing fence: ThreadSanitizer does not
 * model fences (gcc warns with -Wtsan), so where a #StoreLoad barrier is
 * needed the code uses a _full read-modify-write on the variable involved.
 *
 * Types: u32 is AO's `unsigned int`; u64 and ptr use AO_t, which is 64 bits
 * on every platform we support (LP64 Linux, checked below).
 */
#ifndef GMP_ATOMIC_H
#define GMP_ATOMIC_H

#include <atomic_ops.h>
#include <stdbool.h>
#include <stdint.h>

_Static_assert(sizeof(AO_t) == 8, "libgmp needs a 64-bit AO_t");
_Static_assert(sizeof(unsigned) == 4, "libgmp needs a 32-bit unsigned");
_Static_assert(sizeof(void *) == sizeof(AO_t), "pointers must fit in AO_t");

#define GMP__AO32(p) ((volatile unsigned *)(p))
#define GMP__AO64(p) ((volatile AO_t *)(p))

/* ---- 32-bit ------------------------------------------------------------ */
static inline uint32_t gmp__load32_rlx(const volatile uint32_t *p)
{
	return AO_int_load((const volatile unsigned *)p);
}
static inline uint32_t gmp__load32_acq(const volatile uint32_t *p)
{
	return AO_int_load_acquire((const volatile unsigned *)p);
}
static inline void gmp__store32_rlx(volatile uint32_t *p, uint32_t v)
{
	AO_int_store(GMP__AO32(p), v);
}
static inline void gmp__store32_rel(volatile uint32_t *p, uint32_t v)
{
	AO_int_store_release(GMP__AO32(p), v);
}
static inline bool gmp__cas32_acq(volatile uint32_t *p, uint32_t o, uint32_t n)
{
	return AO_int_compare_and_swap_acquire(GMP__AO32(p), o, n);
}
static inline bool gmp__cas32_rel(volatile uint32_t *p, uint32_t o, uint32_t n)
{
	return AO_int_compare_and_swap_release(GMP__AO32(p), o, n);
}
static inline bool gmp__cas32_full(volatile uint32_t *p, uint32_t o, uint32_t n)
{
	return AO_int_compare_and_swap_full(GMP__AO32(p), o, n);
}
/* Returns the value found; the swap happened iff it equals o. */
static inline uint32_t gmp__fcas32_full(volatile uint32_t *p, uint32_t o,
					uint32_t n)
{
	return AO_int_fetch_compare_and_swap_full(GMP__AO32(p), o, n);
}
static inline uint32_t gmp__xchg32_full(volatile uint32_t *p, uint32_t n)
{
	uint32_t o = gmp__load32_rlx(p);
	for (;;) {
		uint32_t seen = gmp__fcas32_full(p, o, n);
		if (seen == o)
			return o;
		o = seen;
	}
}
/* Fetch-and-add; returns the old value. */
static inline uint32_t gmp__add32_rlx(volatile uint32_t *p, int32_t d)
{
	return AO_int_fetch_and_add(GMP__AO32(p), (unsigned)d);
}
static inline uint32_t gmp__add32_full(volatile uint32_t *p, int32_t d)
{
	return AO_int_fetch_and_add_full(GMP__AO32(p), (unsigned)d);
}

/* The load half of a Dekker pair: a load that stays after this thread's
 * earlier _full RMWs, so that of two threads that each do a _full RMW on
 * one variable and then this load of the other's, at least one sees the
 * other's write. AO has no sequentially consistent load; its acquire load
 * is that instruction on both our targets (MOV on x86-64, which a locked
 * RMW already orders; LDAR on arm64, which the architecture keeps after an
 * earlier STLR/STLXR). A compiler allowed to use RCpc's LDAPR for acquire
 * loads would break that, so there it gets a full fence first. */
#if defined(__aarch64__) && defined(__ARM_FEATURE_RCPC)
#define GMP__SC_LOAD_FENCE() AO_nop_full()
#else
#define GMP__SC_LOAD_FENCE() ((void)0)
#endif
static inline uint32_t gmp__load32_sc(const volatile uint32_t *p)
{
	GMP__SC_LOAD_FENCE();
	return AO_int_load_acquire((const volatile unsigned *)p);
}

/* ---- 64-bit ------------------------------------------------------------ */
static inline uint64_t gmp__load64_rlx(const volatile uint64_t *p)
{
	return AO_load((const volatile AO_t *)p);
}
static inline uint64_t gmp__load64_acq(const volatile uint64_t *p)
{
	return AO_load_acquire((const volatile AO_t *)p);
}
static inline void gmp__store64_rlx(volatile uint64_t *p, uint64_t v)
{
	AO_store(GMP__AO64(p), v);
}
static inline void gmp__store64_rel(volatile uint64_t *p, uint64_t v)
{
	AO_store_release(GMP__AO64(p), v);
}
static inline bool gmp__cas64_full(volatile uint64_t *p, uint64_t o, uint64_t n)
{
	return AO_compare_and_swap_full(GMP__AO64(p), o, n);
}
static inline uint64_t gmp__xchg64_full(volatile uint64_t *p, uint64_t n)
{
	uint64_t o = gmp__load64_rlx(p);
	for (;;) {
		uint64_t seen =
			AO_fetch_compare_and_swap_full(GMP__AO64(p), o, n);
		if (seen == o)
			return o;
		o = seen;
	}
}
static inline uint64_t gmp__add64_rlx(volatile uint64_t *p, int64_t d)
{
	return AO_fetch_and_add(GMP__AO64(p), (AO_t)d);
}
static inline uint64_t gmp__add64_full(volatile uint64_t *p, int64_t d)
{
	return AO_fetch_and_add_full(GMP__AO64(p), (AO_t)d);
}
static inline void gmp__or64_full(volatile uint64_t *p, uint64_t bits)
{
	AO_or_full(GMP__AO64(p), (AO_t)bits);
}
/* As gmp__load32_sc. */
static inline uint64_t gmp__load64_sc(const volatile uint64_t *p)
{
	GMP__SC_LOAD_FENCE();
	return AO_load_acquire((const volatile AO_t *)p);
}

/* ---- pointers ---------------------------------------------------------- */
#define gmp__loadp_rlx(pp)                                                     \
	((__typeof__(*(pp)))AO_load((const volatile AO_t *)(pp)))
#define gmp__loadp_acq(pp)                                                     \
	((__typeof__(*(pp)))AO_load_acquire((const volatile AO_t *)(pp)))
#define gmp__storep_rlx(pp, v) AO_store(GMP__AO64(pp), (AO_t)(v))
#define gmp__storep_rel(pp, v) AO_store_release(GMP__AO64(pp), (AO_t)(v))
#define gmp__casp_full(pp, o, n)                                               \
	AO_compare_and_swap_full(GMP__AO64(pp), (AO_t)(o), (AO_t)(n))
#define gmp__casp_rel(pp, o, n)                                                \
	AO_compare_and_swap_release(GMP__AO64(pp), (AO_t)(o), (AO_t)(n))
#define gmp__casp_acq(pp, o, n)                                                \
	AO_compare_and_swap_acquire(GMP__AO64(pp), (AO_t)(o), (AO_t)(n))

/* ---- bytes (flags) ----------------------------------------------------- */
static inline bool gmp__loadb_rlx(const volatile bool *p)
{
	return AO_char_load((const volatile unsigned char *)p) != 0;
}
static inline void gmp__storeb_rlx(volatile bool *p, bool v)
{
	AO_char_store((volatile unsigned char *)p, (unsigned char)v);
}

/* Small state words (a G's preemption fields, internal.h): 8-bit loads,
 * stores and a CAS. */
static inline uint8_t gmp__load8_rlx(const volatile uint8_t *p)
{
	return AO_char_load((const volatile unsigned char *)p);
}
static inline uint8_t gmp__load8_acq(const volatile uint8_t *p)
{
	return AO_char_load_acquire((const volatile unsigned char *)p);
}
static inline void gmp__store8_rlx(volatile uint8_t *p, uint8_t v)
{
	AO_char_store((volatile unsigned char *)p, v);
}
static inline void gmp__store8_rel(volatile uint8_t *p, uint8_t v)
{
	AO_char_store_release((volatile unsigned char *)p, v);
}
static inline bool gmp__cas8_full(volatile uint8_t *p, uint8_t o, uint8_t n)
{
	return AO_char_compare_and_swap_full((volatile unsigned char *)p, o, n);
}

/* Two adjacent flag bytes tested as one (a P's attn, internal.h): a
 * 16-bit relaxed load of a word whose bytes are stored one at a time. */
static inline uint16_t gmp__load16_rlx(const volatile uint16_t *p)
{
	return AO_short_load((const volatile unsigned short *)p);
}

/* A CPU hint for spin-wait loops. */
static inline void gmp__cpu_relax(void)
{
#if defined(__x86_64__)
	__asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
