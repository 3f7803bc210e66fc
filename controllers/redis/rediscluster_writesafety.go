package redis

import (
	"context"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
)

// setWriteSafety carries out StepSetWriteSafety: CONFIG SET on each node of the step.
func (r *RedisClusterReconciler) setWriteSafety(ctx context.Context, s *state) error {
	return r.configureReported(ctx, s, report.ReasonWriteSafetyConfigured, s.step.WriteSafety.String(), func(addr string) error {
		return execute.SetWriteSafety(ctx, addr, s.certs.Config, s.login(), s.step.WriteSafety)
	})
}
