// Package testmem measures how far a piece of code grows the Go heap, for tests that check
// a transfer's memory does not grow with the data it moves.
package testmem

import (
	"runtime"
	"sync"
	"time"
)

// HeapGrowth runs f and returns the most HeapInuse rose above its level before f, sampled
// every 20 ms while f runs (a garbage collection first sets the level).
func HeapGrowth(f func()) int64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := base.HeapInuse
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
		}
	})
	f()
	close(done)
	wg.Wait()
	return int64(peak) - int64(base.HeapInuse)
}
