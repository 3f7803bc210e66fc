package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
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
	if !hasEvent(t.Context(), ns, report.ReasonNoReplicaInTime) {
		t.Errorf("no %s event while the replica %s was down", report.ReasonNoReplicaInTime, replica.Name)
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

// TestRedisClusterStrictWriteSafetyThroughScaleOut: a Strict cluster of 3 masters with a
// replica each scales out to 4 under two writers, one with plain SETs and one that follows
// each SET with WAIT 1. A slot move into the new master is a write there (MIGRATE's
// RESTORE-ASKING), refused with NOREPLICAS until its replica acknowledges its stream: the
// scale-out must still end with 4 balanced masters, Ready, and both writers' acknowledged
// keys read back through every node.
func TestRedisClusterStrictWriteSafetyThroughScaleOut(t *testing.T) {
	t.Parallel()
	_, key, rc, pw := formedWith(t, "strictscale", 6, 3, func(rc *redisv1alpha1.RedisCluster) { rc.Spec.WriteSafety = redisv1alpha1.WriteSafetyStrict })
	plain := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	defer plain.Stop()
	waited := redistest.StartWaitWriter(rc.Status.Nodes[0].Instance, pw)
	plain.WaitWritten(t, 300)
	waitWritten(t, waited, 100)
	rc = scaleOutToFourMasters(t, key, "with writeSafety Strict under two writers")
	plain.WaitWritten(t, 300)
	before := waited.Written()
	waitWritten(t, waited, before+100)
	_, plainOutage := plain.Stop()
	confirmed, unconfirmed := waited.Stop()
	failures, lastErr := plain.Failures()
	t.Logf("scale-out: plain writes refused or blocked for at most %s at a time (%d refused, the last: %v); %d WAIT 1 writes confirmed, %d acknowledged without a replica and written again",
		plainOutage.Round(10*time.Millisecond), failures, lastErr, len(confirmed), unconfirmed)
	plain.Verify(t, env.Client, rc, pw)
	if lost := redistest.Unreadable(t, rc, pw, confirmed); len(lost) != 0 {
		t.Errorf("%d of %d keys WAIT confirmed do not read back through every node (first: %s)", len(lost), len(confirmed), lost[0])
	}
}

// waitWritten waits until w's WAIT confirmed n keys.
func waitWritten(t *testing.T, w *redistest.WaitWriter, n int) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		return w.Written() >= n, fmt.Sprintf("%d of %d keys confirmed by WAIT", w.Written(), n)
	})
}
