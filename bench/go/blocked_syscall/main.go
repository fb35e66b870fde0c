// bench=blocked_syscall: the Go twin of bench/blocked_syscall.c. A fixed
// CPU job (n goroutines, each computing fib(30) recursively) runs at
// GOMAXPROCS=2, timed alone ("idle") and with 10 goroutines blocked in
// syscall.Read on an empty pipe from syscall.Pipe ("blocked", no
// netpoller), alternately, 7 times each. ratio is the median blocked time
// over the median idle time; threads_before and threads_after count the
// threads created (runtime/pprof's threadcreate profile: Go never lets a
// thread go, so that is also the live total) before the readers blocked
// and while they are blocked.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	fibN     = 30
	nReaders = 10
	rounds   = 7
)

var sink uint64

func fib(k int) uint64 {
	if k < 2 {
		return uint64(k)
	}
	return fib(k-1) + fib(k-2)
}

func job(n int) time.Duration {
	t0 := time.Now()
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddUint64(&sink, fib(fibN))
			wg.Done()
		}()
	}
	wg.Wait()
	return time.Since(t0)
}

func threads() int { return pprof.Lookup("threadcreate").Count() }

func median(d []time.Duration) float64 {
	sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
	return float64(d[len(d)/2].Nanoseconds()) / 1e6
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int("n", 64, "job goroutines")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		panic(err)
	}
	var idle, blocked []time.Duration
	var before, after int
	job(*n)
	for r := 0; r < rounds; r++ {
		time.Sleep(20 * time.Millisecond)
		if r == 0 {
			before = threads()
		}
		idle = append(idle, job(*n))

		var wg sync.WaitGroup
		var in int32
		wg.Add(nReaders)
		for i := 0; i < nReaders; i++ {
			go func() {
				buf := make([]byte, 1)
				atomic.AddInt32(&in, 1)
				if m, err := syscall.Read(fds[0], buf); m != 1 || err != nil {
					panic(err)
				}
				wg.Done()
			}()
		}
		for atomic.LoadInt32(&in) < nReaders {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		if r == 0 {
			after = threads()
		}
		blocked = append(blocked, job(*n))
		if _, err := syscall.Write(fds[1], make([]byte, nReaders)); err != nil {
			panic(err)
		}
		wg.Wait()
	}
	i, b := median(idle), median(blocked)
	fmt.Printf("bench=blocked_syscall procs=%d n=%d idle_ms=%.2f blocked_ms=%.2f ratio=%.3f threads_before=%d threads_after=%d\n",
		*procs, *n, i, b, b/i, before, after)
}
