// Package loading loads backups into a RedisCluster's masters: the restore of a new cluster
// (spec.restore: a RedisBackup, a folder of a store, or an archive up to a time) and the
// reload of shards that lost every copy (the restore-lost-shards-from annotation). It reads
// the source once and keeps it (with its store's back-off), gives the planner what is left
// to load (Restore, Reload), and carries out the planner's load steps in the background
// (restore.Loads), recording each shard that ended in the status being built.
package loading

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// shardTimeout bounds the load of one shard (its check and its load), which runs in the
// background (restore.Loads): a step only starts it or collects its end.
const shardTimeout = 30 * time.Minute

// Loader reads the sources of restores and reloads and runs their loads. Every field but
// MaxRecord and Fence must be set; the memories are the reconciler's, kept from one
// reconcile to the next and forgotten with the cluster.
type Loader struct {
	// Opener reads RedisBackups, folders and archives, and their stores' credentials.
	Opener restore.Opener
	// Recorder sends the events of loads and failures.
	Recorder events.EventRecorder
	// Loads runs the shard loads off the reconcile workers.
	Loads *restore.Loads
	// Sources keeps the sources as read; Failures the failing reads and loads, for their
	// back-off and so that each failure is reported once.
	Sources  *restore.Sources
	Failures *backupstore.Failures
	// MaxRecord is the largest RDB record loaded, in bytes (rdbload.DefaultMaxRecord when 0).
	MaxRecord int64
	// Fence, when set, is checked before a load changes a node.
	Fence func(context.Context) error
}

// Target is the cluster a step loads into, and how to reach its nodes.
type Target struct {
	// Cluster is the RedisCluster as read; Next the copy whose status the reconcile writes.
	Cluster, Next *redisv1alpha1.RedisCluster
	Login         conn.Login
	TLS           *tls.Config
}

// event sends an event of t's cluster.
func (l *Loader) event(t Target, kind, reason, action, format string, args ...any) {
	l.Recorder.Eventf(t.Cluster, nil, kind, reason, action, format, args...)
}

// readSource returns the source of what (a restore or a reload) of rc kept from an earlier
// look, or reads it with read and keeps it: a source whose manifest was read until the
// cluster forgets it, one whose endpoint the operator refuses for good, one whose store read
// failed for its back-off. A problem is reported once in a Warning event.
func (l *Loader) readSource(rc *redisv1alpha1.RedisCluster, what string, read func() (*restore.Source, error)) (*restore.Source, error) {
	k := backupstore.FailureKey{Object: client.ObjectKeyFromObject(rc), What: what}
	if src := l.Sources.Get(k); src != nil {
		return src, nil
	}
	src, err := read()
	if err != nil || src == nil {
		return src, err
	}
	switch {
	case src.Manifest != nil:
		l.Failures.Succeeded(k)
		l.Sources.Keep(k, src, time.Time{})
	case src.Refused:
		if _, distinct := l.Failures.Fail(k, src.Problem, time.Now()); distinct {
			l.Recorder.Eventf(rc, nil, corev1.EventTypeWarning, backupstore.ReasonEndpointRefused, "Restore", "%s", src.Problem)
		}
		l.Sources.Keep(k, src, time.Time{})
	case src.StoreFailed:
		wait, distinct := l.Failures.Fail(k, src.Problem, time.Now())
		if distinct {
			l.Recorder.Eventf(rc, nil, corev1.EventTypeWarning, report.ReasonRestoreFailed, "Restore", "%s; tried again in %s, then less and less often", src.Problem, wait)
		}
		l.Sources.Keep(k, src, time.Now().Add(wait))
	}
	return src, nil
}

// runLoad starts load of t's cluster in the background (as a retry, see restore.Job, when
// mayHaveRun says another operator run may have begun it; part of a new cluster's restore
// when restoring), or collects its end: ended is true once, with the load's result and
// error; until then pending is true. A load that failed is a restore.FailedError, reported
// in a Warning event (reason, action) only when its message is new, and is not started again
// before its back-off (backupstore.Backoff) is over, whatever wakes the cluster: meanwhile
// runLoad returns the last failure again, not ended.
func (l *Loader) runLoad(t Target, src *restore.Source, load plan.ShardLoad, mayHaveRun, restoring bool, reason, action string) (res restore.Result, ended, pending bool, err error) {
	k := restore.KeyOf(client.ObjectKeyFromObject(t.Cluster), load)
	return l.background(t, k, "load of "+nodes.ShardName(load.Shard), reason, action, "%v; tried again in %s, then less and less often",
		func(retried bool) func(context.Context) (restore.Result, error) {
			job := restore.Job{Cluster: t.Cluster.Name, Node: t.node(load.Addr), Source: src, Step: load, Restoring: restoring, Retry: mayHaveRun || retried,
				ACL: resources.RedisACLEnabled(t.Cluster), MaxRecord: l.MaxRecord, Fence: l.Fence}
			return job.Run
		})
}

// background starts the work of k (what names it for its back-off) in the background, or
// collects its end, as runLoad says; a failure's Warning event is format's (the error, then
// the wait), and start gets whether an earlier attempt failed.
func (l *Loader) background(t Target, k restore.Key, what, reason, action, format string,
	start func(retried bool) func(context.Context) (restore.Result, error)) (res restore.Result, ended, pending bool, err error) {
	failing := backupstore.FailureKey{Object: k.Cluster, What: what}
	now := time.Now()
	switch st, res, err := l.Loads.Poll(k); st {
	case restore.Finished:
		if err == nil {
			l.Failures.Succeeded(failing)
			return res, true, false, nil
		}
		if errors.Is(err, objectstore.ErrAccessDenied) || errors.Is(err, objectstore.ErrTLS) || errors.Is(err, objectstore.ErrNoBucket) {
			// The credentials or the CA may have changed since the source was read.
			l.Sources.Forget(k.Cluster)
		}
		wait, distinct := l.Failures.Fail(failing, err.Error(), now)
		if distinct {
			l.event(t, corev1.EventTypeWarning, reason, action, format, err, wait)
		}
		return res, true, false, &restore.FailedError{Message: err.Error(), After: wait}
	case restore.Unknown:
		if wait, message := l.Failures.Waiting(failing, now); wait > 0 {
			return restore.Result{}, false, false, &restore.FailedError{Message: message, After: wait}
		}
		l.Loads.Start(k, shardTimeout, start(l.Failures.Count(failing) > 0))
	}
	return restore.Result{}, false, true, nil
}

// node is how the operator reaches the node at addr of t's cluster.
func (t Target) node(addr string) rdbstream.Options {
	return rdbstream.Options{Addr: addr, Username: t.Login.User, Password: t.Login.Password, TLS: t.TLS}
}
