// bench=preempt_contention: the Go twin of bench/preempt_contention.c. At
// GOMAXPROCS=procs (default: the CPUs this process may use), -busy shells
// spin beside it (sh -c 'while :; do :; done', as in C: the same
// neighbours on both sides; killed at the end).
// mode=chunks: n goroutines (default 4) each do chunks of work_us µs of
// CPU work (an LCG loop, calibrated first) with a call between two chunks
// (where Go's prologue check lets it stop, as gmp_preempt_point() does in
// C), ms ms of work on procs CPUs in all. mode=fib: n goroutines (default
// 2000) each compute fib(k) by the double recursion.
//
// Each goroutine counts itself running (an atomic counter) around each
// stretch of its own code; Go also stops a goroutine anywhere (with a
// signal), and one stopped mid-stretch stays counted. A goroutine reads
// Threads: from /proc/self/status every 5 ms.
//
// Reported as in C: most_running, over_procs, threads_peak, cpu_share (the
// process's CPU time over the work's wall time) and work_ms.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var running, most int32
var sink uint64

func enter() {
	r := atomic.AddInt32(&running, 1)
	for {
		m := atomic.LoadInt32(&most)
		if r <= m || atomic.CompareAndSwapInt32(&most, m, r) {
			return
		}
	}
}

func leave() { atomic.AddInt32(&running, -1) }

//go:noinline
func lcg(x uint64, n int64) uint64 {
	for i := int64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func point() {}

func fib(k int) uint64 {
	if k >= 16 {
		leave()
		point()
		enter()
	}
	if k < 2 {
		return uint64(k)
	}
	return fib(k-1) + fib(k-2)
}

func threadCPU() int64 {
	var ts syscall.Timespec
	// CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// LCG steps per µs of this thread's CPU time: the best of three runs of
// about 20 ms each.
func calibrate() float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := 0.0
	n := int64(100000)
	x := uint64(1)
	for r := 0; r < 3; r++ {
		for {
			t0 := threadCPU()
			x = lcg(x, n)
			t := threadCPU() - t0
			if t >= 20*1000*1000 {
				if v := float64(n) / (float64(t) / 1000); v > best {
					best = v
				}
				break
			}
			n *= 2
		}
	}
	atomic.AddUint64(&sink, x)
	return best
}

func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func threadsNow() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Threads:") {
			n, _ := strconv.Atoi(strings.TrimSpace(l[8:]))
			return n
		}
	}
	return -1
}

func main() {
	ncpu := runtime.NumCPU()
	procs := flag.Int("procs", ncpu, "GOMAXPROCS")
	n := flag.Int("n", -1, "goroutines (default 4, or 2000 with mode=fib)")
	mode := flag.String("mode", "chunks", "chunks or fib")
	workUs := flag.Int64("work_us", 30, "µs of work between switch points")
	ms := flag.Int64("ms", 2000, "ms of work on procs CPUs in all")
	k := flag.Int("fib", 27, "fib argument")
	busy := flag.Int("busy", ncpu, "spinning processes beside")
	flag.Parse()
	fibMode := *mode == "fib"
	if !fibMode && *mode != "chunks" {
		fmt.Fprintln(os.Stderr, "preempt_contention: -mode is chunks or fib")
		os.Exit(2)
	}
	if *n < 0 {
		*n = 4
		if fibMode {
			*n = 2000
		}
	}
	runtime.GOMAXPROCS(*procs)
	iters := int64(calibrate() * float64(*workUs))
	chunks := *ms * 1000 * int64(*procs) / (int64(*n) * *workUs)
	if chunks < 1 {
		chunks = 1
	}

	var spinners []*exec.Cmd
	for i := 0; i < *busy; i++ {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		spinners = append(spinners, c)
	}
	time.Sleep(100 * time.Millisecond)

	var stop int32
	peak := 0
	sampled := make(chan struct{})
	go func() {
		for atomic.LoadInt32(&stop) == 0 {
			if t := threadsNow(); t > peak {
				peak = t
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(sampled)
	}()

	cpu0 := processCPU()
	t0 := time.Now()
	var wg sync.WaitGroup
	wg.Add(*n)
	for i := 0; i < *n; i++ {
		x := uint64(i + 1)
		go func() {
			if fibMode {
				enter()
				r := fib(*k)
				leave()
				atomic.AddUint64(&sink, r)
			} else {
				for c := int64(0); c < chunks; c++ {
					enter()
					x = lcg(x, iters)
					leave()
					point()
				}
				atomic.AddUint64(&sink, x)
			}
			wg.Done()
		}()
	}
	wg.Wait()
	work := time.Since(t0)
	cpu := processCPU() - cpu0
	atomic.StoreInt32(&stop, 1)
	<-sampled
	for _, c := range spinners {
		c.Process.Kill()
		c.Wait()
	}
	m := int(atomic.LoadInt32(&most))
	over := 0
	if m > *procs {
		over = m - *procs
	}
	fmt.Printf("bench=preempt_contention procs=%d n=%d mode=%s busy=%d most_running=%d over_procs=%d threads_peak=%d cpu_share=%.3f work_ms=%.1f",
		*procs, *n, *mode, *busy, m, over, peak,
		float64(cpu)/float64(work.Nanoseconds()), float64(work.Nanoseconds())/1e6)
	if fibMode {
		fmt.Printf(" fib=%d\n", *k)
	} else {
		fmt.Printf(" work_us=%d chunks=%d\n", *workUs, chunks)
	}
}
