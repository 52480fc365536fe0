// Package testparallel lets a test package whose tests mostly wait (for
// runs on a lab host, for leases to expire, for a demo to come up) run
// more of them at once than go test's default of GOMAXPROCS, which suits
// tests that compute. A -parallel given on the command line wins.
package testparallel

import (
	"flag"
	"strconv"
)

// Default sets -test.parallel to n unless the command line set it. Call
// it from TestMain before m.Run.
func Default(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
