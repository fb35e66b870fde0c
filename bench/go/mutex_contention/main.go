// bench=mutex_contention: the Go twin of bench/mutex_contention.c. Four
// goroutines each lock a shared sync.Mutex, increment a counter and unlock,
// n times; ns_per_op is the wall time per lock+increment+unlock pair:
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

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "lock/unlock pairs per goroutine")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	var mu sync.Mutex
	var counter int64
	var wg sync.WaitGroup

	start := time.Now()
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := int64(0); i < *n; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if counter != workers**n {
		fmt.Fprintf(os.Stderr, "mutex_contention: counter %d, want %d\n", counter, workers**n)
		os.Exit(1)
	}
	fmt.Printf("bench=mutex_contention procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/(workers*float64(*n)))
}
