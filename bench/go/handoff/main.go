// bench=handoff: the Go twin of bench/handoff.c. At GOMAXPROCS=1, each
// trial the main goroutine starts a goroutine (into runnext) and at once
// blocks in syscall.Read on an empty pipe made by syscall.Pipe (a blocking
// descriptor the netpoller never sees). The new goroutine runs only once
// sysmon has retaken the P and handed it to another thread; it records the
// time and writes the byte that ends the read. Reported: the latency from
// just before the read to the other goroutine's first instruction.
// --jitter_us=J busy-waits a pseudo-random 0..J µs before each trial (see
// bench/handoff.c).
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"syscall"
	"time"
)

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int("n", 200, "trials")
	jitterUs := flag.Int64("jitter_us", 0, "random busy wait before each trial, µs")
	flag.Parse()
	rng := uint64(88172645463325252)
	jitter := func() {
		if *jitterUs == 0 {
			return
		}
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		until := time.Now().Add(time.Duration(rng%uint64(*jitterUs*1000)) * time.Nanosecond)
		for time.Now().Before(until) {
		}
	}
	runtime.GOMAXPROCS(*procs)

	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		panic(err)
	}
	lat := make([]time.Duration, 0, *n)
	var ran time.Time
	done := make(chan struct{}, 1)
	buf := make([]byte, 1)
	for i := -10; i < *n; i++ {
		jitter()
		go func() {
			ran = time.Now()
			if _, err := syscall.Write(fds[1], []byte{'x'}); err != nil {
				panic(err)
			}
			done <- struct{}{}
		}()
		t0 := time.Now()
		if m, err := syscall.Read(fds[0], buf); m != 1 || err != nil {
			panic(err)
		}
		<-done
		if i >= 0 {
			lat = append(lat, ran.Sub(t0))
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	fmt.Printf("bench=handoff procs=%d n=%d jitter_us=%d median_us=%.1f p90_us=%.1f max_us=%.1f\n",
		*procs, *n, *jitterUs, us(lat[*n/2]), us(lat[(*n*9)/10]), us(lat[*n-1]))
}
