package testenv

import (
	"flag"
	"strconv"
)

// TestsAtATime makes a package's TestMain run n of its parallel tests at a time unless
// -parallel was given (Go's default is GOMAXPROCS, 2 here). Most of a cluster test is
// waiting on Redis and the control plane: the RedisCluster suite took 1,241 s two at a
// time on 2 cores, 648 s four at a time; the measurements are in
// docs/development/benchmarks/measurements.md.
func TestsAtATime(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
