package redistest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// AckWriter writes keys a:<n> = n one at a time through a cluster client, never
// overwriting one, and records the time each was acknowledged: a restore to a time must
// hold every key acknowledged before it. It can pause, so that a target time falls where no
// write is near.
type AckWriter struct {
	client *goredis.ClusterClient
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acks   []time.Time // acks[n] is when a:<n> was acknowledged
	pause  chan time.Duration
}

// StartAckWriter starts an AckWriter on the cluster that the node at addr belongs to.
func StartAckWriter(addr, password string) *AckWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &AckWriter{client: goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Password: password, MaxRedirects: 16,
		ReadTimeout: time.Second, WriteTimeout: time.Second, DialTimeout: time.Second}),
		cancel: cancel, done: make(chan struct{}), pause: make(chan time.Duration, 1)}
	go w.run(ctx)
	return w
}

func (w *AckWriter) run(ctx context.Context) {
	defer close(w.done)
	for n := 0; ctx.Err() == nil; {
		select {
		case d := <-w.pause:
			time.Sleep(d)
		default:
		}
		if err := w.client.Set(ctx, "a:"+strconv.Itoa(n), n, 0).Err(); err != nil {
			time.Sleep(20 * time.Millisecond) // retried: the key is never given up
			continue
		}
		acked := time.Now()
		w.mu.Lock()
		w.acks = append(w.acks, acked)
		w.mu.Unlock()
		n++
		time.Sleep(time.Millisecond)
	}
}

// Pause makes the writer write nothing for d before its next key, without waiting.
func (w *AckWriter) Pause(d time.Duration) { w.pause <- d }

// PauseFor makes the writer write nothing for d, and returns the middle of the pause,
// once it is over.
func (w *AckWriter) PauseFor(d time.Duration) time.Time {
	from := max(w.Count()-1, 0)
	w.Pause(d)
	for {
		time.Sleep(5 * time.Millisecond)
		w.mu.Lock()
		for i := from; i+1 < len(w.acks); i++ {
			// The writer may ack a key or two between the count and the pause: the pause is
			// the first gap of at least d.
			if gap := w.acks[i+1].Sub(w.acks[i]); gap >= d {
				w.mu.Unlock()
				return w.acks[i].Add(gap / 2)
			}
		}
		w.mu.Unlock()
	}
}

// Count is how many keys the writer has had acknowledged.
func (w *AckWriter) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

// WriteMore waits until the writer has had n more keys acknowledged.
func (w *AckWriter) WriteMore(n int) {
	for before := w.Count(); w.Count() < before+n; {
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the writer and returns the ack times: the key a:<n> was acknowledged at the
// n-th.
func (w *AckWriter) Stop() []time.Time {
	w.cancel()
	<-w.done
	_ = w.client.Close()
	return w.acks
}

// PresentThroughEach reads the keys a:0 to a:<n-1> of an AckWriter through each node of
// rc (a cluster client seeded with that node only) and returns, per key, on how many nodes
// it read back with its value.
func PresentThroughEach(t *testing.T, rc *redisv1alpha1.RedisCluster, password string, n int) []int {
	t.Helper()
	found := make([]int, n)
	for _, node := range rc.Status.Nodes {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{node.Instance}, Password: password, MaxRedirects: 16, ReadTimeout: 5 * time.Second})
		for from := 0; from < n; from += 500 {
			to := min(from+500, n)
			cmds := make([]*goredis.StringCmd, 0, to-from)
			_, _ = c.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
				for i := from; i < to; i++ {
					cmds = append(cmds, p.Get(t.Context(), "a:"+strconv.Itoa(i)))
				}
				return nil
			})
			for i, cmd := range cmds {
				if v, err := cmd.Result(); err == nil && v == strconv.Itoa(from+i) {
					found[from+i]++
				} else if err != nil && !errors.Is(err, goredis.Nil) {
					t.Errorf("reading a:%d through %s: %v", from+i, node.Instance, err)
					_ = c.Close()
					return found
				}
			}
		}
		_ = c.Close()
	}
	return found
}
