// udp_echo: the Go twin of bench/udp_echo.c. C clients, each a goroutine
// with a UDP socket of its own, make round trips of S-byte datagrams to a
// UDP echo server on 127.0.0.1 that runs in a process of its own (this
// program again, with -serve: one goroutine doing ReadFrom and WriteTo
// back to the sender). rt_per_s is the round trips per second of all
// clients together; server_cpu_ns_per_rt the server process's CPU time
// (user and system, from /proc) per round trip over the same interval.
//
//	udp_echo [--procs=P] [--n=N] [--conns=C] [--size=S]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

func serve() {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "udp_echo server:", err)
		os.Exit(1)
	}
	fmt.Printf("port=%d\n", c.LocalAddr().(*net.UDPAddr).Port)
	os.Stdout.Sync()
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "udp_echo server:", err)
			os.Exit(1)
		}
		c.WriteToUDP(buf[:n], from)
	}
}

// cpuTicks is the user + system CPU ticks of process pid so far, or -1.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int64("n", 200000, "round trips in all")
	conns := flag.Int64("conns", 16, "clients")
	size := flag.Int("size", 64, "datagram bytes")
	serveFlag := flag.Int("serve", 0, "run the server")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	if *serveFlag != 0 {
		serve()
		return
	}
	rounds := *n / *conns
	if rounds < 1 {
		rounds = 1
	}
	cmd := exec.Command("/proc/self/exe", "--serve=1", fmt.Sprintf("--procs=%d", *procs))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "udp_echo:", err)
		os.Exit(1)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "port=")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "udp_echo: the server did not start")
		os.Exit(1)
	}
	srv := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}

	var connected, finished sync.WaitGroup
	start := make(chan struct{})
	var mu sync.Mutex
	failed := false
	connected.Add(int(*conns))
	finished.Add(int(*conns))
	for i := int64(0); i < *conns; i++ {
		go func(id int64) {
			defer finished.Done()
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				panic(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			o := make([]byte, *size)
			in := make([]byte, *size)
			connected.Done()
			<-start
			for r := int64(0); r < rounds; r++ {
				for k := range o {
					o[k] = byte(id + r)
				}
				o[0] = byte(r)
				if _, err := c.WriteToUDP(o, srv); err != nil {
					mu.Lock()
					failed = true
					mu.Unlock()
					return
				}
				m, _, err := c.ReadFromUDP(in)
				if err != nil || m != *size || !bytes.Equal(in, o) {
					fmt.Fprintln(os.Stderr, "udp_echo: round", r, err)
					mu.Lock()
					failed = true
					mu.Unlock()
					return
				}
			}
		}(i)
	}
	connected.Wait()
	c0 := cpuTicks(cmd.Process.Pid)
	t0 := time.Now()
	close(start)
	finished.Wait()
	secs := time.Since(t0).Seconds()
	c1 := cpuTicks(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	if failed {
		os.Exit(1)
	}
	total := rounds * *conns
	cpuNs := float64(c1-c0) * 1e9 / 100 // USER_HZ is 100 on Linux
	fmt.Printf("bench=udp_echo procs=%d n=%d rt_per_s=%.0f server_cpu_ns_per_rt=%.0f conns=%d size=%d\n",
		*procs, total, float64(total)/secs, cpuNs/float64(total), *conns, *size)
}
