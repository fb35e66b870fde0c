// bench=spawn_join: the Go twin of bench/spawn_join.c. Main starts n
// goroutines that each do nothing but wg.Done, then waits for them;
// ns_per_op is the time per goroutine, spawn to completion.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"
)

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "goroutines")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(int(*n))
	for i := int64(0); i < *n; i++ {
		go func() { wg.Done() }()
	}
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("bench=spawn_join procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/float64(*n))
}
