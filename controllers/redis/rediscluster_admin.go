package redis

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
)

// adminFor is the reconcile's Admin: the cluster's pooled one (clusterconn.Pool), fenced
// when Fence is set.
func (r *RedisClusterReconciler) adminFor(s *state) clusterconn.Admin {
	if s.admin == nil {
		// A node still serving one of the cluster's earlier certificates after the trust
		// moved on must answer, or it would never be checked and reloaded.
		trust := s.certs.Config
		if trust != nil {
			trust = r.ownCertsTLS(s)
		}
		s.admin = r.admins.Get(client.ObjectKeyFromObject(s.rc), s.login(), trust, func() clusterconn.Admin { return r.NewAdmin(s.login(), trust) })
		if r.Fence != nil {
			s.admin = clusterconn.Fenced(s.admin, r.fence)
		}
	}
	return s.admin
}

// Connections is the pool of the reconciler's connections to each cluster, which the
// RedisBackup controller reads (RedisBackupReconciler.Clusters).
func (r *RedisClusterReconciler) Connections() *clusterconn.Pool { return &r.admins }

// ErrFenced wraps the error of a Fence that forbids this replica to act.
var ErrFenced = errors.New("not acting on Redis")

// fence checks Fence, if any: nil while this replica may act on Redis, an error wrapping
// ErrFenced otherwise.
func (r *RedisClusterReconciler) fence(ctx context.Context) error {
	if r.Fence == nil {
		return nil
	}
	if err := r.Fence(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return nil
}
