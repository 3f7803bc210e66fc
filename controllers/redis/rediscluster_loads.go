package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// loadKey names one shard load: a backup's shard Shard into the master NodeID of a cluster.
type loadKey struct {
	cluster types.NamespacedName
	node    string
	shard   int
}

// keyOf is the key of load, a load into rc.
func keyOf(rc *redisv1alpha1.RedisCluster, load plan.ShardLoad) loadKey {
	return loadKey{cluster: types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}, node: load.NodeID, shard: load.Shard}
}

// loadState is where a shard load stands.
type loadState int

// The states of a shard load, as poll reports them.
const (
	// loadNone: no load of that key is known (never started, or its end was taken).
	loadNone loadState = iota
	// loadRunning: the load is under way.
	loadRunning
	// loadFinished: the load ended (with its result or error), reported once.
	loadFinished
)

// shardLoad is one load under way or ended.
type shardLoad struct {
	cancel context.CancelFunc
	ended  bool
	result rdbload.Result
	err    error
}

// shardLoads runs the shard loads of restores and reloads off the reconcile workers: a
// load takes as long as its data (up to restoreShardTimeout), a step only as long as it
// takes to start one or to collect its end. When a load ends, its cluster is woken through
// wake; an operator that restarts meanwhile starts the load again (RESTORE REPLACE makes
// a second load of the same keys harmless; a reload's replay, which is not, empties the
// slots first: reloadLoadGate).
type shardLoads struct {
	mu    sync.Mutex
	loads map[loadKey]*shardLoad
	// wake, when set, gets an event for the cluster of every load that ends.
	wake chan event.GenericEvent
	// run names this operator process in status.reload.startedLoads (reloadLoadGate).
	run string
}

// newShardLoads is a shardLoads whose ended loads wake their cluster through a channel
// (for a source.Channel), with a new random run name.
func newShardLoads() *shardLoads {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &shardLoads{loads: map[loadKey]*shardLoad{}, wake: make(chan event.GenericEvent, 64), run: hex.EncodeToString(b[:])}
}

// known reports whether a load of k runs, or ended without its end collected (poll).
func (l *shardLoads) known(k loadKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.loads[k]
	return ok
}

// poll reports where the load k stands; an ended load's result and error are returned, and
// forgotten, once.
func (l *shardLoads) poll(k loadKey) (loadState, rdbload.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ld, ok := l.loads[k]
	switch {
	case !ok:
		return loadNone, rdbload.Result{}, nil
	case !ld.ended:
		return loadRunning, rdbload.Result{}, nil
	}
	delete(l.loads, k)
	return loadFinished, ld.result, ld.err
}

// start runs load for k in the background, bounded by timeout, unless a load of k is known
// already.
func (l *shardLoads) start(k loadKey, timeout time.Duration, load func(context.Context) (rdbload.Result, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.loads[k]; ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	ld := &shardLoad{cancel: cancel}
	l.loads[k] = ld
	go func() {
		defer cancel()
		res, err := load(ctx)
		l.mu.Lock()
		ld.ended, ld.result, ld.err = true, res, err
		l.mu.Unlock()
		select {
		case l.wake <- event.GenericEvent{Object: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: k.cluster.Namespace, Name: k.cluster.Name}}}:
		default:
			// The channel is full or nobody reads it: the cluster's next look collects it.
			return
		}
	}()
}

// forget cancels the loads of cluster and drops what is known of them (a deleted cluster).
func (l *shardLoads) forget(cluster types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ld := range l.loads {
		if k.cluster == cluster {
			ld.cancel()
			delete(l.loads, k)
		}
	}
}

// runLoad starts load of s's cluster in the background (as a retry, see loadShard, when
// mayHaveRun says another operator run may have begun it), or collects its end: ended is true
// once, with the load's result and error; until then the state notes a load pending. A load
// that failed is a loadFailedError, reported in a Warning event (reason, action) only when
// its message is new, and is not started again before its back-off (backupstore.Backoff) is
// over, whatever wakes the cluster: meanwhile runLoad returns the last failure again, not
// ended.
func (r *RedisClusterReconciler) runLoad(s *state, src *restoreSource, load plan.ShardLoad, mayHaveRun bool, reason, action string) (res rdbload.Result, ended bool, err error) {
	k := keyOf(s.rc, load)
	failing := backupstore.FailureKey{Object: k.cluster, What: "load of " + nodes.ShardName(load.Shard)}
	now := time.Now()
	switch st, res, err := r.backgroundLoads().poll(k); st {
	case loadFinished:
		if err == nil {
			r.storeFailures.Succeeded(failing)
			return res, true, nil
		}
		if errors.Is(err, objectstore.ErrAccessDenied) || errors.Is(err, objectstore.ErrTLS) || errors.Is(err, objectstore.ErrNoBucket) {
			// The credentials or the CA may have changed since the source was read.
			r.sources.forget(k.cluster)
		}
		wait, distinct := r.storeFailures.Fail(failing, err.Error(), now)
		if distinct {
			r.event(s, corev1.EventTypeWarning, reason, action, "%v; tried again in %s, then less and less often", err, wait)
		}
		return res, true, &loadFailedError{message: err.Error(), after: wait}
	case loadNone:
		if wait, message := r.storeFailures.Waiting(failing, now); wait > 0 {
			return rdbload.Result{}, false, &loadFailedError{message: message, after: wait}
		}
		login := s.login()
		node := rdbstream.Options{Addr: load.Addr, Username: login.User, Password: login.Password, TLS: s.tls}
		rc := s.rc
		retry := mayHaveRun || r.storeFailures.Count(failing) > 0
		r.backgroundLoads().start(k, restoreShardTimeout, func(ctx context.Context) (rdbload.Result, error) { return r.loadShard(ctx, rc, node, src, load, retry) })
	}
	s.loadsPending = true
	return rdbload.Result{}, false, nil
}

// loadFailedError is a shard load that failed (a store that cannot be read, a corrupted or
// unreadable file): the cluster looks again after its back-off, not at once.
type loadFailedError struct {
	message string
	after   time.Duration
}

func (e *loadFailedError) Error() string { return e.message }

// loadBackoff is how long to wait before looking again when err holds only failed loads
// (the shortest of their back-offs); ok is false when err is nil or holds another error.
func loadBackoff(err error) (after time.Duration, ok bool) {
	var failed *loadFailedError
	if joined, isJoin := err.(interface{ Unwrap() []error }); isJoin {
		for _, e := range joined.Unwrap() {
			a, ok := loadBackoff(e)
			if !ok {
				return 0, false
			}
			if after == 0 || a < after {
				after = a
			}
		}
		return after, after > 0
	}
	if !errors.As(err, &failed) {
		return 0, false
	}
	return failed.after, true
}
