// bench=parallel_fib: the Go twin of bench/parallel_fib.c. n goroutines
// each compute fib(27) by the naive double recursion and a WaitGroup tells
// main when all are done; the same work is timed at GOMAXPROCS=1 and at
// -procs, in one process. Go needs nothing in the recursion to stay fair:
// its compiler puts a preemption check into every function's prologue,
// which is where bench/parallel_fib.c calls gmp_preempt_point(). The two
// settings run alternately -reps times and each figure is the least of
// its rounds, as in the C program.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var sink uint64

func fib(k int) uint64 {
	if k < 2 {
		return uint64(k)
	}
	return fib(k-1) + fib(k-2)
}

func round(n, k int) time.Duration {
	t0 := time.Now()
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddUint64(&sink, fib(k))
			wg.Done()
		}()
	}
	wg.Wait()
	return time.Since(t0)
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int("n", 1000, "goroutines")
	k := flag.Int("fib", 27, "fib argument")
	reps := flag.Int("reps", 3, "alternating rounds; the least of each counts")
	flag.Parse()
	if *reps < 1 || *reps > 100 {
		fmt.Fprintln(os.Stderr, "parallel_fib: -reps must be 1..100")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*procs)

	round(*n, *k-7) // warm up
	p1 := time.Duration(math.MaxInt64)
	pn := time.Duration(math.MaxInt64)
	for r := 0; r < *reps; r++ {
		if *procs > 1 {
			runtime.GOMAXPROCS(1)
			if t := round(*n, *k); t < p1 {
				p1 = t
			}
			runtime.GOMAXPROCS(*procs)
		}
		if t := round(*n, *k); t < pn {
			pn = t
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	fmt.Printf("bench=parallel_fib procs=%d n=%d total_ms=%.1f", *procs, *n, ms(pn))
	if *procs > 1 {
		fmt.Printf(" p1_ms=%.1f speedup=%.3f", ms(p1), float64(p1)/float64(pn))
	}
	fmt.Printf(" fib=%d reps=%d\n", *k, *reps)
}
