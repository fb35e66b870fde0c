// bench=ticker_many: the Go twin of bench/ticker_many.c. n tickers of
// -period_us (default 1000) run for -ms (default 2000), each read by a
// goroutine of its own that receives its ticks until the time is up.
// cpu_ms is the process's CPU time (user + system, getrusage) from before
// the first ticker is made until the last goroutine has stopped its
// ticker and ended; ticks is how many values the goroutines received in
// all, cpu_ns_per_tick the one over the other.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func cpuNs() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return (ru.Utime.Sec+ru.Stime.Sec)*1000000000 + (ru.Utime.Usec+ru.Stime.Usec)*1000
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 10000, "tickers")
	periodUs := flag.Int64("period_us", 1000, "tick period in microseconds")
	ms := flag.Int64("ms", 2000, "how long they run")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	period := time.Duration(*periodUs) * time.Microsecond

	var wg sync.WaitGroup
	var stop int32
	var ticks int64
	c0, t0 := cpuNs(), time.Now()
	wg.Add(int(*n))
	for i := int64(0); i < *n; i++ {
		go func() {
			t := time.NewTicker(period)
			got := int64(0)
			for atomic.LoadInt32(&stop) == 0 {
				<-t.C
				got++
			}
			t.Stop()
			atomic.AddInt64(&ticks, got)
			wg.Done()
		}()
	}
	time.Sleep(time.Duration(*ms) * time.Millisecond)
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	c1, elapsed := cpuNs(), time.Since(t0)
	perTick := 0.0
	if ticks > 0 {
		perTick = float64(c1-c0) / float64(ticks)
	}
	fmt.Printf("bench=ticker_many procs=%d n=%d cpu_ms=%.1f wall_ms=%.1f ticks=%d cpu_ns_per_tick=%.1f\n",
		*procs, *n, float64(c1-c0)/1e6, float64(elapsed.Nanoseconds())/1e6, ticks, perTick)
}
