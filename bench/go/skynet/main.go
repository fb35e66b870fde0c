// bench=skynet: the Go twin of bench/skynet.c, the classic skynet
// benchmark: a tree of goroutines, 10 children per node, n leaves, sums
// sent up over unbuffered channels. total_ms is from the first spawn to
// the root's result.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

const div = 10

func skynet(c chan int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	sub := size / div
	for i := int64(0); i < div; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 1000000, "leaves (a power of 10)")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	p := int64(1)
	for p < *n {
		p *= div
	}
	if p != *n {
		fmt.Fprintln(os.Stderr, "skynet: -n must be a power of 10")
		os.Exit(2)
	}

	c := make(chan int64)
	start := time.Now()
	go skynet(c, 0, *n)
	result := <-c
	elapsed := time.Since(start)
	if want := *n * (*n - 1) / 2; result != want {
		fmt.Fprintf(os.Stderr, "skynet: sum %d, want %d\n", result, want)
		os.Exit(1)
	}
	fmt.Printf("bench=skynet procs=%d n=%d total_ms=%.1f sum=%d\n", *procs, *n,
		float64(elapsed.Nanoseconds())/1e6, result)
}
