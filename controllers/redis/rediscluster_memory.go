package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// readConf sets s.memory, s.coverage and s.writeSafety from the generated redis.conf as the cache has it
// (the user's redis.conf is in it, and its maxmemory wins), or from the spec alone while
// there is none.
func (r *RedisClusterReconciler) readConf(ctx context.Context, s *state) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisConfigMapName(s.rc)}, cm)
	switch {
	case err == nil:
		s.memory = resources.RedisMemoryOf(s.rc, cm.Data[resources.RedisConfigFile])
		s.coverage = resources.RedisFullCoverageOf(cm.Data[resources.RedisConfigFile])
		s.writeSafety = resources.RedisWriteSafetyOf(s.rc, cm.Data[resources.RedisConfigFile])
	case apierrors.IsNotFound(err):
		s.memory = resources.RedisMemoryFromSpec(s.rc)
		s.writeSafety = resources.RedisWriteSafetyOf(s.rc, "")
	default: // not known: nothing is set this look
		s.memory, s.writeSafety = resources.RedisMemory{}, resources.RedisWriteSafety{}
	}
}

// memoryTarget is s.memory in the planner's terms (zero, so nothing is set, when unknown).
func memoryTarget(s *state) plan.Memory {
	if s.memory.Policy == "" {
		return plan.Memory{}
	}
	return plan.Memory{MaxMemory: s.memory.MaxMemory, Policy: s.memory.Policy, KeepMaxMemory: !s.memory.Known}
}

// setMemory carries out StepSetMemory: CONFIG SET on each node of the step.
func (r *RedisClusterReconciler) setMemory(ctx context.Context, s *state) error {
	return r.configureReported(ctx, s, report.ReasonMemoryConfigured, s.step.Memory.String(), func(addr string) error {
		return execute.SetMemory(ctx, addr, s.certs.Config, s.login(), s.step.Memory)
	})
}

// configureReported is configureNodes with a Normal event of reason saying that what was
// set without a restart on the nodes that took it.
func (r *RedisClusterReconciler) configureReported(ctx context.Context, s *state, reason, what string, set func(addr string) error) error {
	done, err := r.configureNodes(ctx, s, set)
	if len(done) > 0 {
		r.event(s, corev1.EventTypeNormal, reason, "Configure", "set %s without a restart on %d nodes (%s)", what, len(done), strings.Join(done, ", "))
	}
	return err
}

// configureNodes runs set on the address of each node of the step, fenced, and returns the
// addresses it succeeded on. A node that did not answer is set at a later look, when it
// answers again; the first node that refused is the error.
func (r *RedisClusterReconciler) configureNodes(ctx context.Context, s *state, set func(addr string) error) ([]string, error) {
	var done []string
	var refused error
	for _, addr := range s.step.Addrs {
		if err := r.fence(ctx); err != nil {
			return done, err
		}
		err := set(addr)
		var netErr net.Error
		switch {
		case err == nil:
			done = append(done, addr)
		case errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded):
		case refused == nil:
			refused = err
		}
	}
	return done, refused
}
