package redistest

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// WaitWriter writes keys q:<n> = n as an application that needs every acknowledged write
// kept does: SET, then WAIT 1 on the same connection of the key's master; a key counts as
// written only once WAIT says a replica has it. A failed SET, a MOVED or a WAIT that times
// out with no replica is tried again (the cluster's routes reloaded) until it succeeds.
type WaitWriter struct {
	client *goredis.ClusterClient
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	written int
	// unconfirmed counts the SETs a master acknowledged that WAIT did not confirm.
	unconfirmed int
}

// waitTimeout is how long WAIT waits for a replica's acknowledgement, in milliseconds.
const waitTimeout = 500

// StartWaitWriter starts a WaitWriter whose client knows only the node at addr.
func StartWaitWriter(addr, password string) *WaitWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &WaitWriter{client: testClient(addr, password, nil), cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *WaitWriter) run(ctx context.Context) {
	defer close(w.done)
	for n := 0; ctx.Err() == nil; n++ {
		key := "q:" + strconv.Itoa(n)
		for ctx.Err() == nil {
			if w.write(ctx, key, n) {
				w.mu.Lock()
				w.written = n + 1
				w.mu.Unlock()
				break
			}
			w.client.ReloadState(ctx)
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Millisecond)
	}
}

// write sets key at its master and waits for one replica; it reports whether WAIT
// confirmed the write.
func (w *WaitWriter) write(ctx context.Context, key string, n int) bool {
	node, err := w.client.MasterForKey(ctx, key)
	if err != nil {
		return false
	}
	var set *goredis.StatusCmd
	var wait *goredis.Cmd
	_, err = node.Pipelined(ctx, func(p goredis.Pipeliner) error {
		set = p.Set(ctx, key, n, 0)
		wait = p.Do(ctx, "WAIT", 1, waitTimeout)
		return nil
	})
	if err != nil || set.Err() != nil {
		return false
	}
	if replicas, err := wait.Int(); err != nil || replicas < 1 {
		w.mu.Lock()
		w.unconfirmed++
		w.mu.Unlock()
		return false
	}
	return true
}

// Written is how many keys WAIT confirmed so far.
func (w *WaitWriter) Written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Stop ends the writer and returns the keys WAIT confirmed and how many SETs a master
// acknowledged without a replica's confirmation (each was written again).
func (w *WaitWriter) Stop() (keys []string, unconfirmed int) {
	w.cancel()
	<-w.done
	_ = w.client.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return Keys("q", w.written), w.unconfirmed
}

// Keys is prefix:0 to prefix:n-1, the keys a writer wrote n of.
func Keys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + ":" + strconv.Itoa(i)
	}
	return keys
}

// Unreadable reads keys through each node of rc in turn, as Verify does, and returns those
// that some node cannot serve with the value written, without failing the test: a test of a
// loss the mode allows counts them and compares them with its bound.
func Unreadable(t *testing.T, rc *redisv1alpha1.RedisCluster, password string, keys []string) []string {
	t.Helper()
	lost := readThroughEachReporting(t, rc, password, nil, keys, t.Logf)
	out := make([]string, 0, len(lost))
	for _, k := range keys {
		if lost[k] {
			out = append(out, k)
		}
	}
	return out
}

// Seen is what the nodes' own CLUSTER NODES say during a partition: DualClaim, two nodes
// claim a slot as master, each in its own line; Flagged, a node flags another fail? or fail
// (Redis has noticed a node it cannot hear). A node that does not answer says nothing.
type Seen struct {
	DualClaim, Flagged bool
}

// LookAt reads CLUSTER NODES from each node at addrs once and says what they show.
func LookAt(ctx context.Context, addrs []string, password string) Seen {
	var seen Seen
	var owner [16384]bool
	for _, addr := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password, MaxRetries: -1, PoolSize: 1,
			DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
		text, err := c.ClusterNodes(ctx).Result()
		_ = c.Close()
		if err != nil {
			continue
		}
		for line := range strings.Lines(text) {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			if !strings.Contains(f[2], "myself") && strings.Contains(f[2], "fail") {
				seen.Flagged = true
			}
			if !strings.Contains(f[2], "myself") || !strings.Contains(f[2], "master") {
				continue
			}
			for _, r := range f[8:] {
				if strings.HasPrefix(r, "[") {
					continue
				}
				for _, slot := range Slots(r) {
					if owner[slot] {
						seen.DualClaim = true
					}
					owner[slot] = true
				}
			}
		}
	}
	return seen
}
