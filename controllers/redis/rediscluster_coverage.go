package redis

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// checkCoverage marks, in the snapshot, the answering nodes this operator has not set the
// generated redis.conf's cluster-require-full-coverage on since their process started
// (coverageSet). Nothing can read it back (the operator's Redis user may not CONFIG GET), so
// each node process is set once per operator process: a converged cluster costs nothing.
func (r *RedisClusterReconciler) checkCoverage(s *state) {
	if s.coverage == "" {
		return
	}
	cluster := client.ObjectKeyFromObject(s.rc)
	for i := range s.snap.Nodes {
		if o := &s.snap.Nodes[i]; o.Answered() && !r.coverageSet.has(cluster, s.coverage, o) {
			o.StaleCoverage = true
		}
	}
}

// setCoverage carries out StepSetCoverage: CONFIG SET cluster-require-full-coverage on each
// node of the step, remembered per node process. It sends no event: it changes how a node
// behaves only while a shard is down.
func (r *RedisClusterReconciler) setCoverage(ctx context.Context, s *state) error {
	set, err := r.configureNodes(ctx, s, func(addr string) error {
		return execute.SetCoverage(ctx, addr, s.certs.Config, s.login(), s.step.Coverage)
	})
	cluster := client.ObjectKeyFromObject(s.rc)
	for i := range s.snap.Nodes {
		if o := &s.snap.Nodes[i]; slices.Contains(set, o.Addr) {
			r.coverageSet.mark(cluster, s.step.Coverage, o)
		}
	}
	if len(set) < len(s.step.Addrs) {
		// A node left out without an error (it stopped answering) would be the next step
		// again: not every 100 ms.
		s.step.After = plan.LookSoon
	}
	return err
}
