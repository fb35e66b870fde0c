// bench=file_read: the Go twin of bench/file_read.c. 64 goroutines read 4
// KiB blocks at random offsets of a 256 MiB file opened with O_DIRECT, n
// reads in all, at GOMAXPROCS=procs, with os.File.ReadAt (a pread that
// blocks its thread: sysmon hands the P on, and each blocked read holds a
// thread). reads_per_s is n over the time of the whole run; threads_peak
// the most threads the process had meanwhile (/proc/self/status, sampled
// every millisecond by a goroutine). The file is the C program's
// (file_read.dat in the directory above this program's, made if missing);
// --uring is accepted and ignored, so that both take the same flags.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	tasks    = 64
	block    = 4096
	fileSize = 256 << 20
)

func procThreads() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Bytes()
		if bytes.HasPrefix(l, []byte("Threads:")) {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(l[8:])))
			return n
		}
	}
	return 0
}

func makeFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.Size() == fileSize {
		return nil
	}
	tmp := path + ".tmp"
	w, err := os.Create(tmp)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	x := uint64(88172645463325252)
	for done := 0; done < fileSize; done += len(chunk) {
		for i := 0; i < len(chunk); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			for k := 0; k < 8; k++ {
				chunk[i+k] = byte(x >> (8 * k))
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// aligned returns a block-sized slice aligned to block bytes, as O_DIRECT
// needs.
func aligned() []byte {
	b := make([]byte, 2*block)
	off := block - int(uintptr(unsafe.Pointer(&b[0]))&(block-1))
	if off == block {
		off = 0
	}
	return b[off : off+block]
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 200000, "reads in all")
	file := flag.String("file", "", "the file")
	flag.String("uring", "", "ignored (libgmp's engine)")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	path := *file
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			panic(err)
		}
		path = filepath.Join(filepath.Dir(filepath.Dir(exe)), "file_read.dat")
	}
	if err := makeFile(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var running int32 = 1
	var peak int32
	go func() {
		for atomic.LoadInt32(&running) != 0 {
			if t := int32(procThreads()); t > atomic.LoadInt32(&peak) {
				atomic.StoreInt32(&peak, t)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var errors int64
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(tasks)
	for i := 0; i < tasks; i++ {
		go func(i int) {
			defer wg.Done()
			seed := uint64(i)*0x9e3779b97f4a7c15 + 1
			mine := *n / tasks
			if int64(i) < *n%tasks {
				mine++
			}
			buf := aligned()
			for k := int64(0); k < mine; k++ {
				seed ^= seed << 13
				seed ^= seed >> 7
				seed ^= seed << 17
				off := int64(seed%(fileSize/block)) * block
				if m, err := f.ReadAt(buf, off); m != block || err != nil {
					atomic.AddInt64(&errors, 1)
				}
			}
		}(i)
	}
	wg.Wait()
	el := time.Since(t0)
	atomic.StoreInt32(&running, 0)
	if errors != 0 {
		fmt.Fprintf(os.Stderr, "%d reads failed\n", errors)
		os.Exit(1)
	}
	fmt.Printf("bench=file_read procs=%d n=%d engine=go reads_per_s=%.0f "+
		"us_per_read=%.2f threads_peak=%d uring_ops=0\n",
		*procs, *n, float64(*n)/el.Seconds(),
		float64(el.Microseconds())/float64(*n)*tasks, atomic.LoadInt32(&peak))
}
