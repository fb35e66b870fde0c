// http: the Go side of bench/http. A minimal keep-alive HTTP/1.1 server on
// 127.0.0.1 built on net/http (one goroutine per connection, the
// netpoller underneath), answering GET / with the same body and
// Content-Type as examples/http_server and bench/http's nginx.
//
//	go run ./http [-port N] [-procs P] [-trace PATH]
//
// It prints "port=<n>" on stdout once it listens (port 0, the default,
// picks a free one) and serves until killed.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"

	"gmpbench/benchtrace"
)

var hello = []byte("Hello, world!\n")

func handler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	// Set explicitly, so that net/http does not sniff the body and add
	// "; charset=utf-8": the same head as the other servers.
	h["Content-Type"] = []string{"text/plain"}
	h["Content-Length"] = []string{"14"}
	w.Write(hello)
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any free one)")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: leave as is)")
	traceTo := flag.String("trace", "", "runtime/trace to this file, until killed")
	flag.Parse()
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	benchtrace.Start(*traceTo)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	fmt.Printf("port=%d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	srv := &http.Server{Handler: http.HandlerFunc(handler)}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}
