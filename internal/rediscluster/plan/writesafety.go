package plan

import (
	"fmt"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepSetWriteSafety sets Step.WriteSafety (min-replicas-to-write and min-replicas-max-lag)
// on the nodes at Addrs with CONFIG SET, without a restart.
const StepSetWriteSafety StepKind = "SetWriteSafety"

// WriteSafety is a node's min-replicas-to-write and min-replicas-max-lag.
type WriteSafety struct {
	// MinReplicas is min-replicas-to-write (0: off), MaxLag min-replicas-max-lag in seconds.
	MinReplicas, MaxLag int
	// Managed is false when the operator leaves both as the nodes have them.
	Managed bool
}

// String names the settings w sets, for messages.
func (w WriteSafety) String() string {
	return fmt.Sprintf("min-replicas-to-write %d and min-replicas-max-lag %d", w.MinReplicas, w.MaxLag)
}

// planWriteSafety sets Desired.WriteSafety on every answering node when a master serving
// slots runs with min-replicas-to-write on while it should be off, or the other way round
// (a change of spec.writeSafety: a running node reads redis.conf only at start). Replicas
// are set in the same step, as a replica becomes a master by a failover; nothing can read
// a replica's setting back, so it is set whenever a master's is. A pod on an old template
// is left alone: the upgrade replaces it with the new configuration.
func planWriteSafety(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	want := spec.WriteSafety
	if !want.Managed {
		return Step{}, false
	}
	current := func(o *observe.Observation) bool {
		return spec.UpdateRevision == "" || o.Revision == spec.UpdateRevision
	}
	stale := false
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if _, on := o.Replication[observe.GoodReplicasField]; current(o) && self.IsMaster() && len(self.Slots) > 0 && on != (want.MinReplicas > 0) {
			stale = true
		}
	}
	if !stale {
		return Step{}, false
	}
	addrs, pods := s.AnsweringWhere(current)
	return Step{Kind: StepSetWriteSafety, Addrs: addrs, WriteSafety: want, After: LookSoon,
		Reason: fmt.Sprintf("setting %s on %s", want, strings.Join(pods, ", "))}, true
}
