package redis_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
)

// TestBackupSeriesAreRebuiltAtStart: a new operator process reconciles every RedisBackup
// once; the Completed ones set the cluster's newest-backup series (the input of the
// RedisClusterBackupTooOld alert), the newest winning whatever the order they come in.
func TestBackupSeriesAreRebuiltAtStart(t *testing.T) {
	completed := func(name string, at time.Time, bytes int64) *redisv1alpha1.RedisBackup {
		return &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "rebuilt", Name: name},
			Spec: redisv1alpha1.RedisBackupSpec{Cluster: "cache"},
			Status: redisv1alpha1.RedisBackupStatus{Phase: redisv1alpha1.BackupCompleted, Bytes: bytes,
				StartedAt: &metav1.Time{Time: at.Add(-7 * time.Second)}, CompletedAt: &metav1.Time{Time: at}}}
	}
	newer := completed("newer", time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), 2000)
	older := completed("older", time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), 1000)
	c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(newer, older).WithStatusSubresource(newer, older).Build()
	r := &redisbackup.RedisBackupReconciler{Client: c, Scheme: env.Scheme, Recorder: events.NewFakeRecorder(10)}
	for _, b := range []*redisv1alpha1.RedisBackup{newer, older} {
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
			t.Fatal(err)
		}
	}
	last := testutil.ToFloat64(metrics.RedisBackupLastSuccess.WithLabelValues("rebuilt", "cache"))
	bytes := testutil.ToFloat64(metrics.RedisBackupLastBytes.WithLabelValues("rebuilt", "cache"))
	duration := testutil.ToFloat64(metrics.RedisBackupLastDuration.WithLabelValues("rebuilt", "cache"))
	if last != float64(newer.Status.CompletedAt.Unix()) || bytes != 2000 || duration != 7 {
		t.Errorf("last success %v, bytes %v, duration %v: want the newer backup's %d, 2000, 7", last, bytes, duration, newer.Status.CompletedAt.Unix())
	}
}
