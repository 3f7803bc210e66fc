package restore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// Key names one shard load: a backup's shard Shard into the master Node of Cluster.
type Key struct {
	Cluster types.NamespacedName
	Node    string
	Shard   int
}

// KeyOf is the key of load, a load into cluster.
func KeyOf(cluster types.NamespacedName, load plan.ShardLoad) Key {
	return Key{Cluster: cluster, Node: load.NodeID, Shard: load.Shard}
}

// State is where a shard load stands.
type State int

// The states of a shard load, as Poll reports them.
const (
	// Unknown: no load of that key is known (never started, or its end was taken).
	Unknown State = iota
	// Running: the load is under way.
	Running
	// Finished: the load ended (with its result or error), reported once.
	Finished
)

// load is one load under way or ended.
type load struct {
	cancel context.CancelFunc
	ended  bool
	result Result
	err    error
}

// Loads runs the shard loads of restores and reloads off the reconcile workers: a load
// takes as long as its data, a reconcile only as long as it takes to start one or to
// collect its end. When a load ends, its cluster is woken through Wake; an operator that
// restarts meanwhile starts the load again (RESTORE REPLACE makes a second load of the same
// keys harmless; a reload's replay, which is not, empties the slots first: Job.Retry).
type Loads struct {
	mu    sync.Mutex
	loads map[Key]*load
	wake  chan event.GenericEvent
	run   string
}

// NewLoads is a Loads whose ended loads wake their cluster through Wake, with a new random
// run name.
func NewLoads() *Loads {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Loads{loads: map[Key]*load{}, wake: make(chan event.GenericEvent, 64), run: hex.EncodeToString(b[:])}
}

// Wake gets an event for the cluster of every load that ends (for a source.Channel); an end
// nobody takes in time is collected by the cluster's next look.
func (l *Loads) Wake() <-chan event.GenericEvent { return l.wake }

// Run names this operator process, for status.reload.startedLoads: a load another run
// began may have been left half done.
func (l *Loads) Run() string { return l.run }

// Known reports whether a load of k runs, or ended without its end collected (Poll).
func (l *Loads) Known(k Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.loads[k]
	return ok
}

// Poll reports where the load k stands; an ended load's result and error are returned, and
// forgotten, once.
func (l *Loads) Poll(k Key) (State, Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ld, ok := l.loads[k]
	switch {
	case !ok:
		return Unknown, Result{}, nil
	case !ld.ended:
		return Running, Result{}, nil
	}
	delete(l.loads, k)
	return Finished, ld.result, ld.err
}

// Start runs fn for k in the background, bounded by timeout, unless a load of k is known
// already.
func (l *Loads) Start(k Key, timeout time.Duration, fn func(context.Context) (Result, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.loads[k]; ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	ld := &load{cancel: cancel}
	l.loads[k] = ld
	go func() {
		defer cancel()
		res, err := fn(ctx)
		l.mu.Lock()
		ld.ended, ld.result, ld.err = true, res, err
		l.mu.Unlock()
		select {
		case l.wake <- event.GenericEvent{Object: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: k.Cluster.Namespace, Name: k.Cluster.Name}}}:
		default:
		}
	}()
}

// Forget cancels the loads of cluster and drops what is known of them (a deleted cluster).
func (l *Loads) Forget(cluster types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ld := range l.loads {
		if k.Cluster == cluster {
			ld.cancel()
			delete(l.loads, k)
		}
	}
}

// FailedError is a shard load that failed (a store that cannot be read, a corrupted or
// unreadable file): the cluster looks again After its back-off, not at once.
type FailedError struct {
	Message string
	After   time.Duration
}

func (e *FailedError) Error() string { return e.Message }

// Backoff is how long to wait before looking again when err holds only failed loads (the
// shortest of their back-offs); ok is false when err is nil or holds another error.
func Backoff(err error) (after time.Duration, ok bool) {
	if joined, isJoin := err.(interface{ Unwrap() []error }); isJoin {
		for _, e := range joined.Unwrap() {
			a, ok := Backoff(e)
			if !ok {
				return 0, false
			}
			if after == 0 || a < after {
				after = a
			}
		}
		return after, after > 0
	}
	var failed *FailedError
	if !errors.As(err, &failed) {
		return 0, false
	}
	return failed.After, true
}
