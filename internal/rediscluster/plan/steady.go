package plan

import (
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// steady is how long after a look that chose step the next full look may wait while the
// quiet looks between (each node's CLUSTER INFO head, compared with this look's: the
// controller's prober) find nothing changed; 0 when the next look must be full. Only an
// idle cluster is steady: the step Idle and of no operation, the cluster Ready, every pod's
// node answering with its CLUSTER INFO and staying, and nothing under way that neither a
// quiet look nor a Kubernetes event would see end: a password rotation waiting out its
// grace period (a time), claims growing (the operator has no watch on them), pods the
// StatefulSet has yet to create. It is LookSteady, or LookIdle for a cluster that scales
// on memory (Autoscale: only a full look reads memory) or archives (Archived: a minute-old
// status.archive would be a minute of doubt about what a restore can reach).
func steady(spec Desired, s observe.Snapshot, h health.Health, step Step) time.Duration {
	switch {
	case step.Kind != StepIdle || step.Operation != OpNone || !h.Ready() || len(s.Nodes) == 0:
		return 0
	case step.Rotation != "" && step.Rotation != RotationCurrent:
		return 0
	case VolumesResizing(spec.Volumes) != "" || spec.StatefulSetReplicas > len(s.Nodes):
		return 0
	}
	for i := range s.Nodes {
		o := &s.Nodes[i]
		if !o.Answered() || o.InfoHead == "" || o.Terminating || o.Leaving {
			return 0
		}
	}
	if spec.Autoscale != nil || spec.Archived {
		return LookIdle
	}
	return LookSteady
}
