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

// TestQuietMarkOf: only a full look that ended without error on a step the planner found
// steady (plan.Step.Steady, table-tested in plan's TestSteady) leaves a quiet mark, due when
// the step says, with every node's address and CLUSTER INFO head.
func TestQuietMarkOf(t *testing.T) {
	converged := func() *state {
		s := &state{rc: &redisv1alpha1.RedisCluster{}, next: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42"}}}
		s.step = plan.Step{Kind: plan.StepIdle, After: 2500 * time.Millisecond, Steady: plan.LookSteady}
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
	if m.ResourceVersion != "42" || m.Pods != "rc-0@7 rc-1@8 " || len(m.Addrs) != 2 || m.Heads[1] != "cluster_state:ok\r\nrc-1" ||
		!m.Until.Equal(now.Add(plan.LookSteady)) || m.After != 2500*time.Millisecond {
		t.Errorf("quiet mark = %+v", m)
	}
	s := converged()
	s.step.Steady = plan.LookIdle
	if m, ok := quietMarkOf(s, now); !ok || !m.Until.Equal(now.Add(plan.LookIdle)) {
		t.Errorf("a step steady for %s left a mark due %s later (left: %v)", plan.LookIdle, m.Until.Sub(now), ok)
	}
	for name, spoil := range map[string]func(*state){
		"an error":   func(s *state) { s.err = errors.New("boom") },
		"not steady": func(s *state) { s.step.Steady = 0 },
	} {
		s := converged()
		spoil(s)
		if m, ok := quietMarkOf(s, now); ok {
			t.Errorf("%s: a quiet mark was left: %+v", name, m)
		}
	}
}
