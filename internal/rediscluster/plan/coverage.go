package plan

import (
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepSetCoverage sets cluster-require-full-coverage (Step.Coverage) on the nodes at Addrs
// with CONFIG SET, without a restart: the generated redis.conf changed it (a new default,
// the user's redis.conf), and a running node reads its file only when it starts.
const StepSetCoverage StepKind = "SetCoverage"

// planCoverage sets Desired.Coverage on the answering nodes the operator has not set it on
// (Observation.StaleCoverage). NextStep takes it before every other step, as a side step
// (Step.Behind keeps what is under way for the status): while a shard is lost, the other
// shards serve only once their nodes run with "no".
func planCoverage(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	if spec.Coverage == "" {
		return Step{}, false
	}
	addrs, pods := s.AnsweringWhere(func(o *observe.Observation) bool { return o.StaleCoverage })
	if len(addrs) == 0 {
		return Step{}, false
	}
	return Step{Kind: StepSetCoverage, Addrs: addrs, Coverage: spec.Coverage, After: lookNext,
		Reason: "setting cluster-require-full-coverage " + spec.Coverage + " on " + strings.Join(pods, ", ")}, true
}
