package redis

import (
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
)

// reportInput is what the report stage takes of the reconcile (report.Derive,
// report.RecordMetrics).
func (s *state) reportInput() *report.Input {
	in := &report.Input{
		Cluster: s.rc, Next: s.next, StatefulSet: s.sts, Pods: s.pods, Recorded: s.recorded,
		Snap: s.snap, Health: s.health, Step: s.step, Err: s.err, Unsupported: s.unsupported,
		Restore: s.restore, External: s.external, Announce: s.announce, Certificate: s.certs.X509,
		Held: s.held, Memory: s.memory, WriteSafety: s.writeSafety,
		Volumes: s.volumes, VolumesRefusedNow: s.volumesRefusedNow,
	}
	if s.aclRejected != nil {
		in.ACLRejected = s.aclRejected.Error()
	}
	return in
}

// emitReported sends the events the status derivation called for.
func (r *RedisClusterReconciler) emitReported(s *state) {
	for _, e := range s.reported {
		r.Recorder.Eventf(s.rc, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}
