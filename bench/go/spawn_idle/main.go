// bench=spawn_idle: the Go twin of bench/spawn_idle.c. n goroutines each
// count themselves and block at once in <-gate; total_ms is the time from
// the first go statement until the last one is about to block, loop_ms
// the spawn loop alone. Then close(gate) lets them all end.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "goroutines")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	gate := make(chan struct{})
	done := make(chan struct{}, 1)
	var parked int64
	var wg sync.WaitGroup
	wg.Add(int(*n))

	start := time.Now()
	for i := int64(0); i < *n; i++ {
		go func() {
			if atomic.AddInt64(&parked, 1) == *n {
				done <- struct{}{}
			}
			<-gate
			wg.Done()
		}()
	}
	loop := time.Since(start)
	<-done
	total := time.Since(start)
	close(gate)
	wg.Wait()
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	fmt.Printf("bench=spawn_idle procs=%d n=%d total_ms=%.1f loop_ms=%.1f\n",
		*procs, *n, ms(total), ms(loop))
}
