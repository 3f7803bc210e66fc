package report

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestStatusFromSnapshotHealthAndStep: the phase, the Ready, Progressing and Degraded
// conditions and the events are what the judge (health.Assess) and the planner
// (plan.NextStep) decided of one snapshot, and what the restore under way recorded: the
// status code adds no judgement of its own. Derive runs without a reconciler, and
// derived again from its own status it sends no event a second time.
func TestStatusFromSnapshotHealthAndStep(t *testing.T) {
	type want struct {
		phase              redisv1alpha1.Phase
		ready, progressing metav1.ConditionStatus
		message            string // a part of the Ready condition's message, "" for no check
		degraded           string // the Degraded condition's reason, "" for no check
		reason             string // a part of status.reason, "" for no check
		events             []string
	}
	for name, tc := range map[string]struct {
		spec func(*plan.Desired)
		snap func(*fakesnapshot.Cluster)
		rc   func(*redisv1alpha1.RedisCluster)
		step *plan.Step // instead of the planner's, for steps a fake snapshot does not lead to
		want want
	}{
		"paused: the phase is kept, Progressing False Paused": {rc: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pause, rc.Status.Phase = true, redisv1alpha1.PhaseScaling
		}, want: want{phase: redisv1alpha1.PhaseScaling, ready: metav1.ConditionTrue, progressing: metav1.ConditionFalse, degraded: ReasonAllNodesHealthy}},
		"the cluster lost: Failed, Ready False DataLost, one Warning event": {
			step: &plan.Step{Kind: plan.StepLost, Reason: "every recorded member came back without its data"},
			snap: func(c *fakesnapshot.Cluster) {
				for i := range c.Snap.Nodes {
					c.Silence(i, fakesnapshot.ErrDown)
				}
			},
			want: want{phase: redisv1alpha1.PhaseFailed, ready: metav1.ConditionFalse, progressing: metav1.ConditionFalse, message: "without its data",
				events: []string{ReasonDataLost}}},
		"a master cut off from the majority: Degraded NetworkPartition, one Warning event": {
			snap: func(c *fakesnapshot.Cluster) { c.Flag(1, "aaaaaaaa", "fail").Flag(2, "aaaaaaaa", "fail") },
			want: want{phase: redisv1alpha1.PhaseHealing, ready: metav1.ConditionFalse, progressing: metav1.ConditionTrue, degraded: ReasonNetworkPartition,
				events: []string{ReasonNetworkPartition}}},
		"a pod the StatefulSet has not made, the planner idle: the status names it": {
			snap: func(c *fakesnapshot.Cluster) { c.Snap.Nodes = c.Snap.Nodes[:5] }, step: &plan.Step{Kind: plan.StepIdle},
			want: want{phase: redisv1alpha1.PhaseHealing, ready: metav1.ConditionFalse, progressing: metav1.ConditionTrue, reason: "waiting for the StatefulSet to create rc-5"}},
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
			s := &Input{Cluster: rc, Next: rc.DeepCopy(), Snap: c.Snap,
				StatefulSet: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](6)},
					Status: appsv1.StatefulSetStatus{UpdateRevision: spec.UpdateRevision}}}
			for _, o := range c.Snap.Nodes {
				s.Pods = append(s.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: o.Pod}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
			}
			s.Health = health.Assess(c.Snap)
			s.Step = plan.NextStep(spec, c.Snap, s.Health)
			if tc.step != nil {
				s.Step = *tc.step
			}
			Derive(s)
			st := s.Next.Status
			ready, progressing := meta.FindStatusCondition(st.Conditions, ConditionReady), meta.FindStatusCondition(st.Conditions, ConditionProgressing)
			degraded := meta.FindStatusCondition(st.Conditions, ConditionDegraded)
			if st.Phase != tc.want.phase || ready == nil || ready.Status != tc.want.ready || progressing == nil || progressing.Status != tc.want.progressing ||
				!strings.Contains(ready.Message, tc.want.message) || !strings.Contains(st.Reason, tc.want.reason) || (tc.want.degraded != "" && (degraded == nil || degraded.Reason != tc.want.degraded)) {
				t.Fatalf("step %s (%s %q): phase %q (%q), Ready %+v, Progressing %+v, Degraded %+v; want %+v", s.Step.Kind, s.Step.Operation, s.Step.Reason, st.Phase, st.Reason, ready, progressing, degraded, tc.want)
			}
			var got []string
			for _, e := range s.events {
				got = append(got, e.Reason)
			}
			if !slices.Equal(got, tc.want.events) {
				t.Fatalf("events %v (%+v), want %v", got, s.events, tc.want.events)
			}
			// The next look sees the same: the status it derives is the same, with no event.
			s.Cluster, s.events = s.Next.DeepCopy(), nil
			s.Next = s.Cluster.DeepCopy()
			Derive(s)
			if len(s.events) != 0 || s.Next.Status.Phase != st.Phase {
				t.Fatalf("derived again from its own status: phase %q, events %+v; want %q and no event", s.Next.Status.Phase, s.events, st.Phase)
			}
		})
	}
}
