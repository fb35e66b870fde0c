// bench=rwmutex_mixed: the Go twin of bench/rwmutex_mixed.c. Four
// goroutines each do n operations on a shared sync.RWMutex, 9 in 10 a read
// (RLock, read a shared counter) and 1 in 10 a write (Lock, increment it);
// ns_per_op is the wall time per operation: total / (4 n).
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
	n := flag.Int64("n", 1000000, "operations per goroutine")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	var rw sync.RWMutex
	var counter int64
	var wg sync.WaitGroup
	var sums [workers * 8]int64

	start := time.Now()
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func(sum *int64) {
			var s int64
			for i := int64(0); i < *n; i++ {
				if i%10 == 0 {
					rw.Lock()
					counter++
					rw.Unlock()
				} else {
					rw.RLock()
					s += counter
					rw.RUnlock()
				}
			}
			*sum = s
			wg.Done()
		}(&sums[w*8])
	}
	wg.Wait()
	elapsed := time.Since(start)
	writes := workers * ((*n + 9) / 10)
	if counter != writes {
		fmt.Fprintf(os.Stderr, "rwmutex_mixed: counter %d, want %d\n", counter, writes)
		os.Exit(1)
	}
	fmt.Printf("bench=rwmutex_mixed procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/(workers*float64(*n)))
}
