package redis

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// TestQuietMarkOf: only a full look that ended without error on the idle step, with the
// cluster Ready and every pod's node answering with its CLUSTER INFO, leaves a quiet mark.
func TestQuietMarkOf(t *testing.T) {
	converged := func() *state {
		s := &state{next: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42"}}}
		s.next.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue}}
		s.step = plan.Step{Kind: plan.StepIdle, After: 2500 * time.Millisecond}
		for i, name := range []string{"rc-0", "rc-1"} {
			s.pods = append(s.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: string(rune('7' + i))}})
			s.snap.Nodes = append(s.snap.Nodes, observe.Observation{Pod: name, Addr: "127.1.0." + string(rune('1'+i)) + ":6379",
				View: []nodes.Node{{ID: name, Flags: []string{"myself", "master"}}}, InfoHead: "cluster_state:ok\r\n" + name})
		}
		return s
	}
	now := time.Unix(1000, 0)
	m, ok := quietMarkOf(converged(), now)
	if !ok {
		t.Fatal("a converged look left no quiet mark")
	}
	if m.resourceVersion != "42" || m.pods != "rc-0@7 rc-1@8 " || len(m.addrs) != 2 || m.heads[1] != "cluster_state:ok\r\nrc-1" ||
		!m.until.Equal(now.Add(plan.LookIdle)) || m.after != 2500*time.Millisecond {
		t.Errorf("quiet mark = %+v", m)
	}
	for name, spoil := range map[string]func(*state){
		"an error":             func(s *state) { s.err = errors.New("boom") },
		"a step to take":       func(s *state) { s.step.Kind = plan.StepRebalance },
		"not Ready":            func(s *state) { s.next.Status.Conditions[0].Status = metav1.ConditionFalse },
		"no Ready condition":   func(s *state) { s.next.Status.Conditions = nil },
		"a node silent":        func(s *state) { s.snap.Nodes[1].Err, s.snap.Nodes[1].View = errors.New("timeout"), nil },
		"no CLUSTER INFO head": func(s *state) { s.snap.Nodes[0].InfoHead = "" },
		"a pod terminating":    func(s *state) { s.snap.Nodes[0].Terminating = true },
		"a pod leaving":        func(s *state) { s.snap.Nodes[1].Leaving = true },
		"no nodes at all":      func(s *state) { s.snap.Nodes = nil },
	} {
		s := converged()
		spoil(s)
		if m, ok := quietMarkOf(s, now); ok {
			t.Errorf("%s: a quiet mark was left: %+v", name, m)
		}
	}
}
