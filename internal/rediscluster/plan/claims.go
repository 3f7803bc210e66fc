package plan

import (
	"fmt"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepDeleteClaims deletes the claims Step.Claims, those of the pods a finished scale in
// removed (Volumes.Left), each only while it is the claim the look listed (its UID).
const StepDeleteClaims StepKind = "DeleteClaims"

// planDeleteClaims deletes, with spec.finalizers "foreground", the claims a finished scale
// in left behind: once the StatefulSet has shrunk, no pod will mount them again, and their
// data is that of nodes the cluster removed (their slots were moved off first). Without
// "foreground" they stay, as a StatefulSet leaves them, for a scale out to find again.
func planDeleteClaims(spec Desired, _ observe.Snapshot, _ health.Health) (Step, bool) {
	v := spec.Volumes
	if !v.DeleteLeft || len(v.Left) == 0 {
		return Step{}, false
	}
	names := make([]string, len(v.Left))
	for i, c := range v.Left {
		names[i] = c.Name
	}
	return Step{Kind: StepDeleteClaims, Claims: names, After: LookSoon,
		Reason: fmt.Sprintf("deleting the claims of the pods a scale in removed (spec.finalizers foreground): %s", strings.Join(names, ", "))}, true
}
