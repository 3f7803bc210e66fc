package report

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestMetricsFromSnapshotAndHealth: the cluster's gauges are what the one snapshot and its
// judge say clients see: slots served by the judge's count (not one node's), masters,
// replicas, masters without a replica, silent nodes, and the state gauge down when a node
// reports a failed state or none answers.
func TestMetricsFromSnapshotAndHealth(t *testing.T) {
	type want struct{ stateOK, slotsOK, masters, replicas, alone, silent float64 }
	for name, tc := range map[string]struct {
		snap func(*fakesnapshot.Cluster)
		want want
	}{
		"converged":             {want: want{stateOK: 1, slotsOK: nodes.SlotCount, masters: 3, replicas: 3}},
		"a replica silent":      {snap: func(c *fakesnapshot.Cluster) { c.Silence(3, fakesnapshot.ErrDown) }, want: want{stateOK: 1, slotsOK: nodes.SlotCount, masters: 3, replicas: 2, alone: 1, silent: 1}},
		"a master silent":       {snap: func(c *fakesnapshot.Cluster) { c.Silence(0, fakesnapshot.ErrDown) }, want: want{stateOK: 1, slotsOK: nodes.SlotCount - 5461, masters: 2, replicas: 3, silent: 1}},
		"a node reports a fail": {snap: func(c *fakesnapshot.Cluster) { c.Snap.Nodes[4].Info["cluster_state"] = "fail" }, want: want{slotsOK: nodes.SlotCount, masters: 3, replicas: 3}},
		"every node silent": {snap: func(c *fakesnapshot.Cluster) {
			for i := range c.Snap.Nodes {
				c.Silence(i, fakesnapshot.ErrDown)
			}
		}, want: want{silent: 6}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakesnapshot.Six().Current()
			if tc.snap != nil {
				tc.snap(c)
			}
			c.Snap.Now = time.Unix(1_000_000, 0)
			cluster := "metrics-" + name
			rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: cluster}}
			t.Cleanup(func() { metrics.ForgetRedisCluster("ns", cluster) })
			s := &Input{Cluster: rc, Next: rc.DeepCopy(), Snap: c.Snap, Health: health.Assess(c.Snap)}
			RecordMetrics(s, &NodeCounts{})
			got := want{
				stateOK:  testutil.ToFloat64(metrics.RedisStateOK.WithLabelValues("ns", cluster)),
				slotsOK:  testutil.ToFloat64(metrics.RedisSlotsOK.WithLabelValues("ns", cluster)),
				masters:  testutil.ToFloat64(metrics.RedisMasters.WithLabelValues("ns", cluster)),
				replicas: testutil.ToFloat64(metrics.RedisReplicas.WithLabelValues("ns", cluster)),
				alone:    testutil.ToFloat64(metrics.RedisMastersWithoutReplica.WithLabelValues("ns", cluster)),
				silent:   testutil.ToFloat64(metrics.RedisNodesSilent.WithLabelValues("ns", cluster)),
			}
			if got != tc.want {
				t.Fatalf("gauges %+v, want %+v (health: %+v)", got, tc.want, s.Health)
			}
		})
	}
}
