package redis

import (
	"context"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// The credential stages of a reconcile (credentials.Keeper): reads before the look, the
// kept Secrets while the children are kept, and the planner's rotation steps.

func (r *RedisClusterReconciler) readPassword(ctx context.Context, s *state) error {
	return r.credKeeper().ReadPassword(ctx, s.rc, &s.creds)
}

func (r *RedisClusterReconciler) readApplied(ctx context.Context, s *state) error {
	return r.credKeeper().ReadApplied(ctx, s.rc, &s.creds)
}

func (r *RedisClusterReconciler) readUsers(ctx context.Context, s *state) error {
	return r.credKeeper().ReadUsers(ctx, s.rc, &s.creds)
}

func (r *RedisClusterReconciler) readACLUsers(ctx context.Context, s *state) error {
	return r.credKeeper().ReadACLUsers(ctx, s.rc, &s.creds)
}

// ensurePassword and ensureUsers do not generate a lost Secret again once the cluster was
// formed (it has a member record).
func (r *RedisClusterReconciler) ensurePassword(ctx context.Context, s *state) error {
	return r.credKeeper().EnsurePassword(ctx, s.rc, &s.creds, len(s.recorded) > 0)
}

func (r *RedisClusterReconciler) ensureUsers(ctx context.Context, s *state) error {
	return r.credKeeper().EnsureUsers(ctx, s.rc, &s.creds, len(s.recorded) > 0)
}

func (r *RedisClusterReconciler) ensureACLUsers(ctx context.Context, s *state) error {
	return r.credKeeper().EnsureACLUsers(ctx, s.rc, &s.creds)
}

func (r *RedisClusterReconciler) writeRecord(ctx context.Context, s *state) error {
	return r.credKeeper().WriteRecord(ctx, s.rc, &s.creds, s.step)
}

func (r *RedisClusterReconciler) addPassword(ctx context.Context, s *state) error {
	return r.credKeeper().AddPassword(ctx, s.rc, &s.creds, &s.step, s.certs.Config)
}

func (r *RedisClusterReconciler) keepOnlyPassword(ctx context.Context, s *state) error {
	return r.credKeeper().KeepOnlyPassword(ctx, s.rc, &s.creds, &s.step, s.certs.Config)
}

// login is how the operator authenticates to the nodes (credentials.Facts.Login).
func (s *state) login() conn.Login { return s.creds.Login(s.rc) }
