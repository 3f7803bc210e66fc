package redis_test

import (
	"testing"
	"time"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// TestRedisClusterStrictWriteSafetyThroughRestartAndUpgrade: a cluster with writeSafety
// Strict (a master refuses writes while no replica acknowledged its stream in 2 s) goes
// through a replica's crash and a rolling upgrade of every pod under a writer, each phase
// with a writer of its own: the operator's steps finish (failover first, one pod at a
// time), the status says when masters refuse writes, and no acknowledged key is lost. It
// reports how long writes were refused in each phase.
func TestRedisClusterStrictWriteSafetyThroughRestartAndUpgrade(t *testing.T) {
	t.Parallel()
	ns, key, rc, pw := formedWith(t, "strict", 6, 3, func(rc *redisv1alpha1.RedisCluster) { rc.Spec.WriteSafety = redisv1alpha1.WriteSafetyStrict })

	restart := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	restart.WaitWritten(t, 300)
	replica := podOfRole(rc, "slave")
	start := time.Now()
	if err := kubelet.Crash(ns, replica.Name); err != nil {
		t.Fatal(err)
	}
	waitNotReady(t, key)
	redistest.WaitShape(t, env.Client, key, 3, 6)
	restart.WaitWritten(t, 300)
	_, restartOutage := restart.Stop()
	t.Logf("replica %s crashed and restarted: Ready again after %s; writes refused or blocked for at most %s",
		replica.Name, time.Since(start).Round(100*time.Millisecond), restartOutage.Round(10*time.Millisecond))
	if !hasEvent(t.Context(), ns, rediscontrollers.ReasonNoReplicaInTime) {
		t.Errorf("no %s event while the replica %s was down", rediscontrollers.ReasonNoReplicaInTime, replica.Name)
	}

	upgrade := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	upgrade.WaitWritten(t, 300)
	upgradeVersion(t, key, "7.2.4", 6)
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	upgrade.WaitWritten(t, 300)
	_, upgradeOutage := upgrade.Stop()
	failures, lastErr := upgrade.Failures()
	t.Logf("rolling upgrade: writes refused or blocked for at most %s at a time, %d refused writes (the last: %v)",
		upgradeOutage.Round(10*time.Millisecond), failures, lastErr)
	restart.Verify(t, env.Client, rc, pw)
	upgrade.Verify(t, env.Client, rc, pw)
}
