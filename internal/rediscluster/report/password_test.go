package report

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TestPasswordAppliedFollowsTheNodes: PasswordApplied is never True while a node refuses
// the operator's password, whatever the rotation says, and it names an invalid password
// Secret (a line break inside) with its character.
func TestPasswordAppliedFollowsTheNodes(t *testing.T) {
	invalid, invalidErr := resources.RedisPassword([]byte("a\nb"))
	var pe *resources.PasswordError
	if invalid != "" || !errors.As(invalidErr, &pe) {
		t.Fatalf("RedisPassword(a LF b) = %q, %v", invalid, invalidErr)
	}
	cases := map[string]struct {
		rotation, reason string
		authFailed       []string
		err              error
		status           metav1.ConditionStatus
		names            []string
	}{
		"current":                   {rotation: plan.RotationCurrent, reason: ReasonPasswordCurrent, status: metav1.ConditionTrue},
		"current, but nodes refuse": {rotation: plan.RotationCurrent, authFailed: []string{"cache-0", "cache-3"}, reason: ReasonAuthenticationFailed, status: metav1.ConditionFalse, names: []string{"cache-0", "cache-3", "cache-password"}},
		"no step ran, nodes refuse": {authFailed: []string{"cache-1"}, reason: ReasonAuthenticationFailed, status: metav1.ConditionFalse, names: []string{"cache-1"}},
		"an invalid password Secret": {
			rotation: plan.RotationCurrent, err: &PasswordInvalidError{Secret: "cache-pw", Key: "password", Err: pe},
			reason: ReasonPasswordInvalid, status: metav1.ConditionFalse, names: []string{`"cache-pw"`, "line feed"},
		},
	}
	for name, tc := range cases {
		rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}}
		s := &Input{Cluster: rc, Next: rc.DeepCopy(), Err: tc.err}
		s.Step.Rotation = tc.rotation
		s.Health.AuthFailed = tc.authFailed
		setPasswordApplied(s, 1)
		c := meta.FindStatusCondition(s.Next.Status.Conditions, ConditionPasswordApplied)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: %v, want %s %s", name, c, tc.status, tc.reason)
			continue
		}
		for _, want := range tc.names {
			if !strings.Contains(c.Message, want) {
				t.Errorf("%s: message %q does not name %s", name, c.Message, want)
			}
		}
		if reason, _ := degradedBecause(s); (tc.status == metav1.ConditionFalse) != (reason != "") {
			t.Errorf("%s: Degraded reason %q while PasswordApplied is %s", name, reason, c.Status)
		}
	}
}
