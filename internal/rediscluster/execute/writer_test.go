package execute

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// writer writes and reads back keys through a cluster client while the cluster changes
// under it. Every write is retried until acknowledged, so the last acknowledged value of
// each key is the value it must hold; every read must return it.
type writer struct {
	c    *goredis.ClusterClient
	keys int

	mu     sync.Mutex
	last   map[string]int
	writes int
	errs   []error

	stop chan struct{}
	done chan struct{}
}

// startWriter starts writing keys "w:0".."w:<keys-1>" in a loop, one command at a time.
func startWriter(t *testing.T, addrs []string, password string, keys int) *writer {
	t.Helper()
	w := &writer{
		c: goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: addrs, Password: password, DisableIdentity: true, Protocol: 2,
			MaxRedirects: 8, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		}),
		keys: keys, last: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	t.Cleanup(func() {
		w.halt()
		_ = w.c.Close()
	})
	return w
}

func (w *writer) run() {
	defer close(w.done)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for seq := 1; ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		if seq%10 == 0 {
			time.Sleep(time.Millisecond) // about 5,000 writes and reads a second
		}
		key := "w:" + strconv.Itoa(seq%w.keys)
		if err := w.retry(func() error { return w.c.Set(ctx, key, seq, 0).Err() }); err != nil {
			w.fail(fmt.Errorf("SET %s %d never succeeded: %w", key, seq, err))
			return
		}
		w.mu.Lock()
		w.last[key] = seq
		w.writes++
		check := "w:" + strconv.Itoa(rng.IntN(w.keys))
		want, ok := w.last[check]
		w.mu.Unlock()
		if !ok {
			continue
		}
		var got string
		if err := w.retry(func() error {
			var err error
			got, err = w.c.Get(ctx, check).Result()
			if errors.Is(err, goredis.Nil) {
				got, err = "(nil)", nil
			}
			return err
		}); err != nil {
			w.fail(fmt.Errorf("GET %s (want %d) never succeeded: %w", check, want, err))
			return
		}
		if got != strconv.Itoa(want) {
			w.fail(fmt.Errorf("GET %s = %q, want %d", check, got, want))
		}
	}
}

// retry runs op until it succeeds, for at most 20 s.
func (w *writer) retry(op func() error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := op()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-w.stop:
			return errors.Join(err, errors.New("writer stopped"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// stopAndVerify stops the writer and checks that every key holds its last acknowledged
// value and nothing went wrong meanwhile.
func (w *writer) stopAndVerify(ctx context.Context, t *testing.T) {
	t.Helper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		t.Error(err)
	}
	if w.writes < 100 {
		t.Errorf("the writer made only %d writes", w.writes)
	}
	w.verifyLocked(ctx, t)
	t.Logf("writer: %d acknowledged writes over %d keys, all read back", w.writes, len(w.last))
}

// verifyAgain reads every key back once more (after the writer stopped).
func (w *writer) verifyAgain(ctx context.Context, t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verifyLocked(ctx, t)
}

func (w *writer) verifyLocked(ctx context.Context, t *testing.T) {
	t.Helper()
	lost := 0
	for key, want := range w.last {
		got, err := w.c.Get(ctx, key).Result()
		if err != nil || got != strconv.Itoa(want) {
			lost++
			if lost <= 5 {
				t.Errorf("%s = %q (%v), want %d", key, got, err, want)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d keys lost their last value", lost, len(w.last))
	}
}
