// echo: the Go side of bench/echo. A TCP echo server on 127.0.0.1 built on
// package net (one goroutine per connection, the netpoller underneath),
// for bench/echo --port to drive with the same client as our own server.
//
//	go run ./echo [-port N] [-procs P]
//
// It prints "port=<n>" on stdout once it listens (port 0, the default,
// picks a free one) and serves until killed.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
)

func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				fmt.Fprintln(os.Stderr, "echo:", err)
			}
			return
		}
	}
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any free one)")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: leave as is)")
	flag.Parse()
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	fmt.Printf("port=%d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo:", err)
			os.Exit(1)
		}
		go serve(c) // net sets TCP_NODELAY on accepted connections
	}
}
