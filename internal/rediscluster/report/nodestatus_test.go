package report

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// TestNodeStatuses: each pod's entry in status.nodes says what a client of that node would
// meet, from the pod and the one observation of the look: not running yet, not answering
// (or refusing the password), not in the cluster, flagged failing by a peer, reporting a
// failed cluster state, just started, a replica out of sync, or serving; with the node's
// ID, role, slots and master, and a transition time kept while the status stays.
func TestNodeStatuses(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	const masterID, replicaID, otherID = "m000000000000000000000000000000000000000", "r000000000000000000000000000000000000000", "o000000000000000000000000000000000000000"
	master := nodes.Node{ID: masterID, Myself: true, Role: nodes.RoleMaster, Slots: []nodes.SlotRange{{Start: 0, End: 5460}}}
	replica := nodes.Node{ID: replicaID, Myself: true, Role: nodes.RoleSlave, MasterID: masterID}
	peer := func(id string) nodes.Node { return nodes.Node{ID: id, Role: nodes.RoleMaster} }
	answered := func(self nodes.Node, others ...nodes.Node) observe.Observation {
		return observe.Observation{Pod: "rc-0", Addr: "127.1.0.1:6379", View: append([]nodes.Node{self}, others...),
			Info: map[string]string{"cluster_state": "ok"}, Replication: map[string]string{"master_link_status": "up"},
			Started: now.Add(-time.Hour)}
	}
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rc-0"},
		Spec: corev1.PodSpec{NodeName: "kube-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.1.0.1", HostIP: "10.0.0.1"}}
	for _, tc := range []struct {
		name     string
		pod      func(*corev1.Pod)
		obs      *observe.Observation // nil: no observation for the pod
		peerView []nodes.Node         // a second node's view, when set
		recorded bool
		formed   bool                    // the operator formed the cluster from the node's process
		want     redisv1alpha1.RedisNode // Status, Reason, and the identity fields
		message  string                  // a part of the message
	}{
		{name: "pending", pod: func(p *corev1.Pod) { p.Status.Phase, p.Status.PodIP = corev1.PodPending, "" },
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "PodPending"}, message: "not running yet"},
		{name: "running without an IP", pod: func(p *corev1.Pod) { p.Status.PodIP = "" },
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "PodPending"}},
		{name: "no observation", want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "Unreachable", Instance: "127.1.0.1:6379"}, message: "does not answer"},
		{name: "silent", obs: &observe.Observation{Pod: "rc-0", Err: errors.New("i/o timeout")},
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "Unreachable"}, message: "does not answer"},
		{name: "silent member", obs: &observe.Observation{Pod: "rc-0", Err: errors.New("i/o timeout")}, recorded: true,
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "Unreachable"}, message: "start guard"},
		{name: "wrong password", obs: &observe.Observation{Pod: "rc-0", Err: errors.New("WRONGPASS invalid username-password pair")},
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "AuthenticationFailed"}, message: "refuses the password"},
		{name: "fresh node", obs: ptr.To(answered(nodes.Node{ID: masterID, Myself: true, Role: nodes.RoleMaster})),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "NotInCluster"}},
		{name: "flagged failing by a peer", obs: ptr.To(answered(master, peer(otherID))),
			peerView: []nodes.Node{{ID: otherID, Myself: true, Role: nodes.RoleMaster}, {ID: masterID, Role: nodes.RoleMaster, PossiblyFailed: true}},
			want:     redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "Failing", NodeID: masterID, Type: nodes.RoleMaster, Slots: "0-5460", MasterNodeID: masterID}},
		{name: "cluster state fail", obs: func() *observe.Observation {
			o := answered(master, peer(otherID))
			o.Info["cluster_state"] = "fail"
			return &o
		}(),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "ClusterStateFail"}, message: "cluster_state fail"},
		{name: "just started", obs: func() *observe.Observation {
			o := answered(master, peer(otherID))
			o.Started = now.Add(-2 * time.Second)
			return &o
		}(),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "Settling"}, message: "started 2s ago"},
		{name: "just started, then formed into the cluster", obs: func() *observe.Observation {
			o := answered(master, peer(otherID))
			o.Started = now.Add(-2 * time.Second)
			return &o
		}(), formed: true,
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionTrue, Reason: "Connected"}},
		{name: "replica link down", obs: func() *observe.Observation {
			o := answered(replica, peer(masterID))
			o.Replication["master_link_status"] = "down"
			return &o
		}(),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "ReplicationDown", NodeID: replicaID, Type: nodes.RoleSlave, MasterNodeID: masterID}, message: "link to its master is down"},
		{name: "replica in a full sync", obs: func() *observe.Observation {
			o := answered(replica, peer(masterID))
			o.Replication["master_sync_in_progress"] = "1"
			return &o
		}(),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionFalse, Reason: "ReplicationDown"}, message: "full sync"},
		{name: "serving master", obs: ptr.To(answered(master, peer(otherID))),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionTrue, Reason: "Connected", NodeID: masterID, Type: nodes.RoleMaster, Slots: "0-5460", MasterNodeID: masterID,
				Instance: "127.1.0.1:6379", HostIP: "10.0.0.1", Hostname: "kube-1"}},
		{name: "serving replica", obs: ptr.To(answered(replica, peer(masterID))),
			want: redisv1alpha1.RedisNode{Status: corev1.ConditionTrue, Reason: "Connected", NodeID: replicaID, Type: nodes.RoleSlave, MasterNodeID: masterID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := running.DeepCopy()
			if tc.pod != nil {
				tc.pod(pod)
			}
			s := &Input{Cluster: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc"}}, Pods: []corev1.Pod{*pod}}
			s.Snap.Now, s.Snap.NodeTimeout = now, 5*time.Second
			if tc.formed && tc.obs != nil {
				tc.obs.Replication["run_id"] = "formed"
				s.Snap.FormedFrom = map[string]bool{"formed": true}
			}
			if tc.obs != nil {
				s.Snap.Nodes = []observe.Observation{*tc.obs}
			}
			if tc.peerView != nil {
				s.Snap.Nodes = append(s.Snap.Nodes, observe.Observation{Pod: "rc-1", View: tc.peerView})
			}
			if tc.recorded {
				s.Recorded = map[string]string{"rc-0": masterID}
			}
			got := nodeStatuses(s)
			if len(got) != 1 {
				t.Fatalf("%d entries for 1 pod", len(got))
			}
			g := got[0]
			if g.Name != "rc-0" || g.DomainName != "rc-0.rc.ns.svc.cluster.local" {
				t.Errorf("name %q, domain name %q", g.Name, g.DomainName)
			}
			if g.Status != tc.want.Status || g.Reason != tc.want.Reason {
				t.Errorf("status %s/%s (%s), want %s/%s", g.Status, g.Reason, g.Message, tc.want.Status, tc.want.Reason)
			}
			if tc.message != "" && !strings.Contains(g.Message, tc.message) {
				t.Errorf("message %q does not say %q", g.Message, tc.message)
			}
			for field, pair := range map[string][2]string{
				"nodeID": {g.NodeID, tc.want.NodeID}, "type": {g.Type, tc.want.Type}, "slots": {g.Slots, tc.want.Slots},
				"masterNodeID": {g.MasterNodeID, tc.want.MasterNodeID}, "instance": {g.Instance, tc.want.Instance},
				"hostIP": {g.HostIP, tc.want.HostIP}, "hostname": {g.Hostname, tc.want.Hostname},
			} {
				if pair[1] != "" && pair[0] != pair[1] {
					t.Errorf("%s %q, want %q", field, pair[0], pair[1])
				}
			}
		})
	}
}

// TestNodeStatusesKeepTheTransitionTime: an entry whose status is what the last status said
// keeps that entry's transition time; one whose status changed gets the present.
func TestNodeStatusesKeepTheTransitionTime(t *testing.T) {
	earlier := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rc-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	for _, tc := range []struct {
		previous corev1.ConditionStatus
		kept     bool
	}{{corev1.ConditionFalse, true}, {corev1.ConditionTrue, false}} {
		s := &Input{Cluster: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc"}}, Pods: []corev1.Pod{pod}}
		s.Cluster.Status.Nodes = []redisv1alpha1.RedisNode{{Name: "rc-0", Status: tc.previous, LastTransitionTime: earlier}}
		got := nodeStatuses(s)[0]
		if kept := got.LastTransitionTime.Equal(&earlier); kept != tc.kept {
			t.Errorf("previous status %s, now %s: transition time %s kept %t, want %t", tc.previous, got.Status, got.LastTransitionTime, kept, tc.kept)
		}
	}
}
