package redis

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestStatusFromSnapshotHealthAndStep: the phase and the Ready and Progressing conditions
// are what the judge (health.Assess) and the planner (plan.NextStep) decided of one snapshot,
// and what the restore under way recorded: the status code adds no judgement of its own.
func TestStatusFromSnapshotHealthAndStep(t *testing.T) {
	type want struct {
		phase              redisv1alpha1.Phase
		ready, progressing metav1.ConditionStatus
		message            string // a part of the Ready condition's message, "" for no check
	}
	for name, tc := range map[string]struct {
		spec func(*plan.Desired)
		snap func(*fakesnapshot.Cluster)
		rc   func(*redisv1alpha1.RedisCluster)
		want want
	}{
		"converged": {want: want{phase: redisv1alpha1.PhaseRunning, ready: metav1.ConditionTrue, progressing: metav1.ConditionFalse,
			message: "3 masters serve all 16384 slots"}},
		"a pod terminating: not Ready, healing": {snap: func(c *fakesnapshot.Cluster) { c.Snap.Nodes[4].Terminating = true },
			want: want{phase: redisv1alpha1.PhaseHealing, ready: metav1.ConditionFalse, progressing: metav1.ConditionTrue, message: "pod rc-4 is terminating"}},
		"pods on an old template: upgrading": {spec: func(d *plan.Desired) { d.UpdateRevision = "r2" },
			want: want{phase: redisv1alpha1.PhaseUpgrading, ready: metav1.ConditionTrue, progressing: metav1.ConditionTrue}},
		"a record to write during an upgrade: still upgrading": {spec: func(d *plan.Desired) { d.UpdateRevision, d.MembersRecorded = "r2", false },
			want: want{phase: redisv1alpha1.PhaseUpgrading, ready: metav1.ConditionTrue, progressing: metav1.ConditionTrue}},
		"a replica out of sync: not Ready, healing": {snap: func(c *fakesnapshot.Cluster) { c.Snap.Nodes[3].Replication["master_link_status"] = "down" },
			want: want{phase: redisv1alpha1.PhaseHealing, ready: metav1.ConditionFalse, progressing: metav1.ConditionTrue, message: "no live, synced link"}},
		"a restore with a shard left to load: not Ready, creating": {
			rc: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: "nightly"}
				rc.Status.Restore = &redisv1alpha1.RestoreStatus{Location: "s3://b/nightly", Shards: 3, LoadedShards: []string{"aaaaaaaa", "bbbbbbbb"}}
			},
			want: want{phase: redisv1alpha1.PhaseCreating, ready: metav1.ConditionFalse, progressing: metav1.ConditionTrue, message: "2 of 3 shards loaded"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakesnapshot.Six().Current()
			for i := range c.Snap.Nodes {
				c.Snap.Nodes[i].InfoHead = "cluster_state:ok"
			}
			if tc.snap != nil {
				tc.snap(c)
			}
			spec := plan.Desired{Name: "rc", Replicas: 6, StatefulSetReplicas: 6, UpdateRevision: "r1", MembersRecorded: true}
			if tc.spec != nil {
				tc.spec(&spec)
			}
			rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc", Generation: 1}}
			if tc.rc != nil {
				tc.rc(rc)
			}
			s := &state{rc: rc, next: rc.DeepCopy(), snap: c.Snap, recordExists: true,
				sts: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](6)},
					Status: appsv1.StatefulSetStatus{UpdateRevision: spec.UpdateRevision}}}
			for _, o := range c.Snap.Nodes {
				s.pods = append(s.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: o.Pod}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
			}
			s.health = health.Assess(c.Snap)
			s.step = plan.NextStep(spec, c.Snap, s.health)
			r := &RedisClusterReconciler{Recorder: events.NewFakeRecorder(100)}
			r.observe(s)
			st := s.next.Status
			ready, progressing := meta.FindStatusCondition(st.Conditions, ConditionReady), meta.FindStatusCondition(st.Conditions, ConditionProgressing)
			if st.Phase != tc.want.phase || ready == nil || ready.Status != tc.want.ready || progressing == nil || progressing.Status != tc.want.progressing ||
				!strings.Contains(ready.Message, tc.want.message) {
				t.Fatalf("step %s (%s %q): phase %q, Ready %+v, Progressing %+v; want %+v", s.step.Kind, s.step.Operation, s.step.Reason, st.Phase, ready, progressing, tc.want)
			}
		})
	}
}
