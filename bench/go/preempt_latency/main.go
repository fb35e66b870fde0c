// bench=preempt_latency: the Go twin of bench/preempt_latency.c. At
// GOMAXPROCS=procs, `hogs` goroutines loop without a function call (Go
// 1.14+ preempts them asynchronously, with a signal) while the main
// goroutine sleeps sleep_ms n times. Reported: how long each sleep took,
// its median, p99 and worst, in ms.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

var stop int32

func hog(out *uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	x := uint64(1)
	n := uint64(0)
	for atomic.LoadInt32(&stop) == 0 {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		n++
	}
	*out = x + n
}

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int("n", 200, "sleeps")
	hogs := flag.Int("hogs", -1, "goroutines that never yield (default procs+1)")
	sleepMs := flag.Int("sleep_ms", 10, "each sleep, ms")
	flag.Parse()
	if *hogs < 0 {
		*hogs = *procs + 1
	}
	runtime.GOMAXPROCS(*procs)
	var wg sync.WaitGroup
	res := make([]uint64, *hogs)
	for i := 0; i < *hogs; i++ {
		wg.Add(1)
		go hog(&res[i], &wg)
	}
	d := time.Duration(*sleepMs) * time.Millisecond
	lat := make([]time.Duration, *n)
	for i := range lat {
		t0 := time.Now()
		time.Sleep(d)
		lat[i] = time.Since(t0)
	}
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	ms := func(x time.Duration) float64 { return float64(x.Nanoseconds()) / 1e6 }
	fmt.Printf("bench=preempt_latency procs=%d n=%d hogs=%d sleep_ms=%d median_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
		*procs, *n, *hogs, *sleepMs, ms(lat[*n/2]), ms(lat[(*n*99)/100]), ms(lat[*n-1]))
}
