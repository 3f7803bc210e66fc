package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Counter INCRs counter keys one at a time, round robin, through a cluster client and
// records, for each key, how many INCRs were acknowledged and how many met an error (those
// may or may not have been applied). A replay that applies a command twice shows as a value
// above acknowledged plus uncertain; one that misses a command, as a value below
// acknowledged.
type Counter struct {
	client    *goredis.ClusterClient
	keys      []string
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	acked     map[string]int64
	uncertain map[string]int64
}

// CounterKeys are n counter keys "c:<i>" whose slots keep says yes to.
func CounterKeys(n int, keep func(slot int) bool) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := "c:" + strconv.Itoa(i); keep(KeySlot(k)) {
			keys = append(keys, k)
		}
	}
	return keys
}

// StartCounter starts a Counter over keys on the cluster the node at addr belongs to.
func StartCounter(addr, password string, keys []string) *Counter {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Counter{client: goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Password: password, MaxRedirects: 16,
		ReadTimeout: time.Second, WriteTimeout: time.Second, DialTimeout: time.Second, MaxRetries: -1}),
		keys: keys, cancel: cancel, done: make(chan struct{}), acked: map[string]int64{}, uncertain: map[string]int64{}}
	go c.run(ctx)
	return c
}

func (c *Counter) run(ctx context.Context) {
	defer close(c.done)
	for i := 0; ctx.Err() == nil; i++ {
		k := c.keys[i%len(c.keys)]
		err := c.client.Incr(ctx, k).Err()
		c.mu.Lock()
		if err != nil {
			c.uncertain[k]++
		} else {
			c.acked[k]++
		}
		c.mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Acked is the number of acknowledged INCRs so far, over every key.
func (c *Counter) Acked() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.acked {
		n += v
	}
	return n
}

// Stop stops the counter and returns what it recorded.
func (c *Counter) Stop() (acked, uncertain map[string]int64) {
	c.cancel()
	<-c.done
	_ = c.client.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked, c.uncertain
}

// CheckCounts compares the counters as the node at addr serves them (through a cluster
// client) with what the Counter recorded: each value must lie within [acked, acked +
// uncertain]; it returns one line per counter that does not.
func CheckCounts(ctx context.Context, addr, password string, acked, uncertain map[string]int64, keys []string) ([]string, error) {
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Password: password, MaxRedirects: 16})
	defer func() { _ = cc.Close() }()
	var wrong []string
	for _, k := range keys {
		v, err := cc.Get(ctx, k).Int64()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, fmt.Errorf("GET %s: %w", k, err)
		}
		if v < acked[k] || v > acked[k]+uncertain[k] {
			wrong = append(wrong, fmt.Sprintf("%s = %d, want %d..%d", k, v, acked[k], acked[k]+uncertain[k]))
		}
	}
	return wrong, nil
}
