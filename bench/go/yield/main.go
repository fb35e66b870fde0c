// bench=yield: the Go twin of bench/yield.c. Two goroutines on one P each
// call runtime.Gosched n times; ns_per_op is the time per Gosched, from
// starting them until both have finished.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"

	"gmpbench/benchtrace"
)

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 5000000, "yields per goroutine")
	traceTo := flag.String("trace", "", "runtime/trace to this file (1: a temporary one)")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	stop := benchtrace.Start(*traceTo)

	var wg sync.WaitGroup
	yielder := func() {
		for i := int64(0); i < *n; i++ {
			runtime.Gosched()
		}
		wg.Done()
	}
	start := time.Now()
	wg.Add(2)
	go yielder()
	go yielder()
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	fmt.Printf("bench=yield procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/(2*float64(*n)))
}
