// bench=cond_pingpong: the Go twin of bench/cond_pingpong.c. Two goroutines
// take turns n times each through one sync.Cond and its Mutex: each waits
// until the turn is its own, passes it to the other and signals;
// ns_per_op is the wall time per round trip: total / n.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "round trips")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	var mu sync.Mutex
	cv := sync.NewCond(&mu)
	turn := 0
	var wg sync.WaitGroup

	start := time.Now()
	wg.Add(2)
	for p := 0; p < 2; p++ {
		go func(me int) {
			for i := int64(0); i < *n; i++ {
				mu.Lock()
				for turn != me {
					cv.Wait()
				}
				turn = 1 - me
				cv.Signal()
				mu.Unlock()
			}
			wg.Done()
		}(p)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if turn != 0 {
		fmt.Fprintf(os.Stderr, "cond_pingpong: turn %d at the end\n", turn)
		os.Exit(1)
	}
	fmt.Printf("bench=cond_pingpong procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/float64(*n))
}
