// Package benchtrace gives the Go twins the -trace flag the C programs
// take (bench/benchutil.h): -trace=PATH runs the program with
// runtime/trace writing to PATH, -trace=1 to a temporary file that is
// removed once the trace stops. bench/run's traced rows compare what
// tracing costs each runtime.
package benchtrace

import (
	"fmt"
	"os"
	"runtime/trace"
)

// Start starts the trace that spec asks for ("" for none) and returns
// the function that stops it.
func Start(spec string) func() {
	if spec == "" {
		return func() {}
	}
	var f *os.File
	var err error
	if spec == "1" {
		f, err = os.CreateTemp("", "bench-trace-*.out")
	} else {
		f, err = os.Create(spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trace:", err)
		os.Exit(1)
	}
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, "trace:", err)
		os.Exit(1)
	}
	return func() {
		trace.Stop()
		f.Close()
		if spec == "1" {
			os.Remove(f.Name())
		}
	}
}
