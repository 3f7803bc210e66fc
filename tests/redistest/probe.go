package redistest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// Probe writes keys p:<n> through a cluster-aware client, skipping every key in a slot the
// test expects to be down, and counts each write that failed: while one shard is out, a
// probe shows whether the other shards kept serving. A failed key is tried again until it
// is acknowledged, so every key it reports was written.
type Probe struct {
	client *goredis.ClusterClient
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	acked    []string
	failures int
	firstErr error
}

// StartProbe starts a Probe through the node at addr that writes no key in a slot down
// reports.
func StartProbe(addr, password string, down func(slot int) bool) *Probe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Probe{
		client: testClient(addr, password, nil),
		cancel: cancel, done: make(chan struct{}),
	}
	go p.run(ctx, down)
	return p
}

func (p *Probe) run(ctx context.Context, down func(slot int) bool) {
	defer close(p.done)
	for n := 0; ctx.Err() == nil; n++ {
		key := "p:" + strconv.Itoa(n)
		if down(KeySlot(key)) {
			continue
		}
		for ctx.Err() == nil {
			err := p.client.Set(ctx, key, n, 0).Err()
			p.mu.Lock()
			if err == nil {
				p.acked = append(p.acked, key)
			} else if ctx.Err() == nil {
				p.failures++
				if p.firstErr == nil {
					p.firstErr = err
				}
			}
			p.mu.Unlock()
			if err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Acked is how many keys the probe has been told were written so far.
func (p *Probe) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// Stop ends the probe and returns the keys it wrote, how many writes failed and the first
// failure.
func (p *Probe) Stop() (acked []string, failures int, firstErr error) {
	p.cancel()
	<-p.done
	_ = p.client.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked, p.failures, p.firstErr
}

// Verify stops the probe, fails the test for each failed write and for each acknowledged
// key that does not read back through every node of rc, and returns how many keys it wrote.
func (p *Probe) Verify(t *testing.T, rc *redisv1alpha1.RedisCluster, password string) int {
	t.Helper()
	acked, failures, firstErr := p.Stop()
	if len(acked) < minWritten {
		t.Errorf("the probe had only %d acknowledged keys, want at least %d", len(acked), minWritten)
	}
	if failures > 0 {
		t.Errorf("%d writes to the slots that should have kept serving failed; the first: %v", failures, firstErr)
	}
	if lost := readThroughEach(t, rc, password, nil, acked); len(lost) > 0 {
		t.Errorf("%d of the probe's %d acknowledged keys are missing", len(lost), len(acked))
	}
	return len(acked)
}
