package redis

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// runLoad starts load of s's cluster in the background (as a retry, see restore.Job, when
// mayHaveRun says another operator run may have begun it; part of a new cluster's restore
// when restoring), or collects its end: ended is true
// once, with the load's result and error; until then the state notes a load pending. A load
// that failed is a restore.FailedError, reported in a Warning event (reason, action) only when
// its message is new, and is not started again before its back-off (backupstore.Backoff) is
// over, whatever wakes the cluster: meanwhile runLoad returns the last failure again, not
// ended.
func (r *RedisClusterReconciler) runLoad(s *state, src *restore.Source, load plan.ShardLoad, mayHaveRun, restoring bool, reason, action string) (res restore.Result, ended bool, err error) {
	k := restore.KeyOf(client.ObjectKeyFromObject(s.rc), load)
	failing := backupstore.FailureKey{Object: k.Cluster, What: "load of " + nodes.ShardName(load.Shard)}
	now := time.Now()
	switch st, res, err := r.backgroundLoads().Poll(k); st {
	case restore.Finished:
		if err == nil {
			r.storeFailures.Succeeded(failing)
			return res, true, nil
		}
		if errors.Is(err, objectstore.ErrAccessDenied) || errors.Is(err, objectstore.ErrTLS) || errors.Is(err, objectstore.ErrNoBucket) {
			// The credentials or the CA may have changed since the source was read.
			r.sources.Forget(k.Cluster)
		}
		wait, distinct := r.storeFailures.Fail(failing, err.Error(), now)
		if distinct {
			r.event(s, corev1.EventTypeWarning, reason, action, "%v; tried again in %s, then less and less often", err, wait)
		}
		return res, true, &restore.FailedError{Message: err.Error(), After: wait}
	case restore.Unknown:
		if wait, message := r.storeFailures.Waiting(failing, now); wait > 0 {
			return restore.Result{}, false, &restore.FailedError{Message: message, After: wait}
		}
		login := s.login()
		node := rdbstream.Options{Addr: load.Addr, Username: login.User, Password: login.Password, TLS: s.certs.Config}
		job := restore.Job{Cluster: s.rc.Name, Node: node, Source: src, Step: load, Restoring: restoring, Retry: mayHaveRun || r.storeFailures.Count(failing) > 0,
			ACL: resources.RedisACLEnabled(s.rc), MaxRecord: r.RestoreMaxRecord, Fence: r.fence}
		r.backgroundLoads().Start(k, restoreShardTimeout, job.Run)
	}
	s.loadsPending = true
	return restore.Result{}, false, nil
}
