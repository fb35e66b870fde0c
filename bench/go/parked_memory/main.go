// bench=parked_memory: the Go twin of bench/parked_memory.c. n goroutines
// each block receiving from one unbuffered channel; bytes_per_task is the
// resident-set growth while they are all parked, divided by n; total_ms is
// the time to start them all until the last one is parked. Then the
// channel is closed and every goroutine finishes.
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

// rssBytes reads the resident set size from /proc/self/statm.
func rssBytes() int64 {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	var size, resident int64
	if _, err := fmt.Fscan(f, &size, &resident); err != nil {
		panic(err)
	}
	return resident * int64(os.Getpagesize())
}

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "goroutines")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	gate := make(chan struct{})
	done := make(chan struct{}, 1)
	var parked int64
	var wg sync.WaitGroup
	wg.Add(int(*n))

	before := rssBytes()
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
	<-done
	elapsed := time.Since(start)
	after := rssBytes()
	close(gate)
	wg.Wait()
	fmt.Printf("bench=parked_memory procs=%d n=%d bytes_per_task=%.0f total_ms=%.1f\n",
		*procs, *n, float64(after-before)/float64(*n),
		float64(elapsed.Nanoseconds())/1e6)
}
