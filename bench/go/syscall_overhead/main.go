// bench=syscall_overhead: the Go twin of bench/syscall_overhead.c. One
// goroutine calls getpid n times through syscall.RawSyscall (no scheduler
// involvement) and n times through syscall.Syscall (entersyscall and
// exitsyscall around it), in alternating chunks of n/10. ns_per_op is the
// difference per call, Syscall minus RawSyscall.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"syscall"
	"time"
)

func rawLoop(k int64) {
	for i := int64(0); i < k; i++ {
		if r, _, _ := syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0); r == 0 {
			panic("getpid")
		}
	}
}

func wrappedLoop(k int64) {
	for i := int64(0); i < k; i++ {
		if r, _, _ := syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0); r == 0 {
			panic("getpid")
		}
	}
}

func main() {
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	n := flag.Int64("n", 10000000, "calls of each kind")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	const chunks = 10
	chunk := *n / chunks
	if chunk < 1 {
		chunk = 1
	}
	rawLoop(chunk / 10)
	wrappedLoop(chunk / 10)
	var raw, wrapped time.Duration
	for c := 0; c < chunks; c++ {
		t0 := time.Now()
		rawLoop(chunk)
		t1 := time.Now()
		wrappedLoop(chunk)
		t2 := time.Now()
		raw += t1.Sub(t0)
		wrapped += t2.Sub(t1)
	}
	total := chunk * chunks
	r := float64(raw.Nanoseconds()) / float64(total)
	w := float64(wrapped.Nanoseconds()) / float64(total)
	fmt.Printf("bench=syscall_overhead procs=%d n=%d ns_per_op=%.2f raw_ns=%.2f wrapped_ns=%.2f\n",
		*procs, total, w-r, r, w)
}
