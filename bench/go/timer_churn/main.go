// bench=timer_churn: the Go twin of bench/timer_churn.c. Four goroutines
// together start and stop n timers: each makes a one-shot timer of 1 s
// (time.NewTimer) and stops it before it fires, n/4 times; the garbage
// collector frees them. ns_per_op is the wall time per timer: total / n.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const workers = 4

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "timers in all")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	perTask := *n / workers

	var wg sync.WaitGroup
	var notPending int64
	start := time.Now()
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			bad := int64(0)
			for i := int64(0); i < perTask; i++ {
				t := time.NewTimer(time.Second)
				if !t.Stop() {
					bad++
				}
			}
			atomic.AddInt64(&notPending, bad)
			wg.Done()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if notPending != 0 {
		fmt.Fprintf(os.Stderr, "timer_churn: %d timers were not pending\n", notPending)
		os.Exit(1)
	}
	total := perTask * workers
	fmt.Printf("bench=timer_churn procs=%d n=%d ns_per_op=%.2f total_ms=%.1f\n", *procs, total,
		float64(elapsed.Nanoseconds())/float64(total), float64(elapsed.Nanoseconds())/1e6)
}
