package redis_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// writer writes keys w:<n> = n through a cluster-aware client for as long as it runs,
// retrying a failed write until it succeeds, and remembers every key it was told was
// written, so a test can check that none is lost. It measures the longest stretch during
// which writes kept failing.
type writer struct {
	client    *goredis.ClusterClient
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	written   int
	maxOutage time.Duration // from the first failed write of a key to its success
	maxWrite  time.Duration // the slowest single SET, the client's own retries included
}

func startWriter(addr, password string) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{
		client: goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: []string{addr}, Password: password, MaxRedirects: 16,
			ReadTimeout: time.Second, WriteTimeout: time.Second, DialTimeout: time.Second,
		}),
		cancel: cancel, done: make(chan struct{}),
	}
	go w.run(ctx)
	return w
}

func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	for n := 0; ctx.Err() == nil; n++ {
		var failingSince time.Time
		for ctx.Err() == nil {
			start := time.Now()
			err := w.client.Set(ctx, "w:"+strconv.Itoa(n), n, 0).Err()
			w.mu.Lock()
			w.maxWrite = max(w.maxWrite, time.Since(start))
			w.mu.Unlock()
			if err == nil {
				break
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			time.Sleep(20 * time.Millisecond)
		}
		w.mu.Lock()
		if ctx.Err() == nil {
			w.written = n + 1
		}
		if !failingSince.IsZero() {
			w.maxOutage = max(w.maxOutage, time.Since(failingSince))
		}
		w.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// stop ends the writer and returns how many keys it wrote and the longest time a write
// was failing or blocked.
func (w *writer) stop() (int, time.Duration) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written, max(w.maxOutage, w.maxWrite)
}

// verify reads back every key written, through a new client that learns the current
// topology from addr, and fails the test for each one lost or wrong.
func (w *writer) verify(t *testing.T, addr, password string) {
	t.Helper()
	n, _ := w.stop()
	_ = w.client.Close()
	reader := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Password: password})
	defer func() { _ = reader.Close() }()
	lost := 0
	for i := range n {
		v, err := reader.Get(t.Context(), "w:"+strconv.Itoa(i)).Int()
		if err != nil || v != i {
			lost++
			if lost <= 5 {
				t.Errorf("key w:%d: got %d, %v", i, v, err)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d keys lost", lost, n)
	} else {
		t.Logf("the writer wrote %d keys, none lost", n)
	}
}
