// bench=chan_pingpong: the Go twin of bench/chan_pingpong.c. Two goroutines
// bounce a value over two unbuffered channels n times; ns_per_op is the
// time per round trip.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"

	"gmpbench/benchtrace"
)

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "round trips")
	traceTo := flag.String("trace", "", "runtime/trace to this file (1: a temporary one)")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	stop := benchtrace.Start(*traceTo)

	ping := make(chan int64)
	pong := make(chan int64)
	go func() {
		for i := int64(0); i < *n; i++ {
			v := <-ping
			pong <- v
		}
	}()
	start := time.Now()
	for i := int64(0); i < *n; i++ {
		ping <- i
		if <-pong != i {
			panic("wrong value")
		}
	}
	elapsed := time.Since(start)
	stop()
	fmt.Printf("bench=chan_pingpong procs=%d n=%d ns_per_op=%.2f\n", *procs, *n,
		float64(elapsed.Nanoseconds())/float64(*n))
}
