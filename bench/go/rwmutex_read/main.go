// bench=rwmutex_read: the Go twin of bench/rwmutex_read.c. Four goroutines
// each take and drop a shared sync.RWMutex's read lock n times, reading a
// shared value inside; ns_per_op is the wall time per RLock+RUnlock pair:
// total / (4 n).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

const workers = 4

var shared int64 = 1

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "RLock/RUnlock pairs per goroutine")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	var rw sync.RWMutex
	var wg sync.WaitGroup
	var sums [workers * 8]int64 // one per goroutine, a line apart

	start := time.Now()
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func(sum *int64) {
			var s int64
			for i := int64(0); i < *n; i++ {
				rw.RLock()
				s += shared
				rw.RUnlock()
			}
			*sum = s
			wg.Done()
		}(&sums[w*8])
	}
	wg.Wait()
	elapsed := time.Since(start)
	for w := 0; w < workers; w++ {
		if sums[w*8] != *n {
			fmt.Fprintf(os.Stderr, "rwmutex_read: sum %d, want %d\n", sums[w*8], *n)
			os.Exit(1)
		}
	}
	fmt.Printf("bench=rwmutex_read procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/(workers*float64(*n)))
}
