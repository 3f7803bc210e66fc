package redis

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/child"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// readUsers reads the operator's password of a cluster with ACL users from the users Secret
// without changing anything, so a paused cluster's status can still be read from Redis.
func (r *RedisClusterReconciler) readUsers(ctx context.Context, s *state) (*ctrl.Result, error) {
	if !resources.RedisACLEnabled(s.rc) {
		return nil, nil
	}
	secret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisUsersSecretName(s.rc)}, secret)
	if err == nil {
		s.operatorPassword = string(secret.Data[resources.RedisUsersOperatorKey])
	}
	return nil, client.IgnoreNotFound(err)
}

// ensureUsers keeps the users Secret of a cluster with ACL users: the operator's and the
// exporter's passwords, generated once and kept. Once the cluster is formed a lost Secret is
// not generated again: the nodes run with the lost passwords.
func (r *RedisClusterReconciler) ensureUsers(ctx context.Context, s *state) (*ctrl.Result, error) {
	if !resources.RedisACLEnabled(s.rc) {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisUsersSecretName(s.rc)}
	passwords := map[string][]byte{}
	for _, k := range []string{resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey} {
		kept, err := child.KeptSecretValue(ctx, r.Client, s.rc, key, k)
		if err != nil {
			return nil, err
		}
		if kept == nil && len(s.recorded) > 0 {
			return nil, &passwordLostError{secret: key.Name, users: true}
		}
		if kept == nil {
			if kept, err = child.NewPassword(); err != nil {
				return nil, err
			}
		}
		passwords[k] = kept
	}
	desired := resources.RedisUsersSecret(s.rc, string(passwords[resources.RedisUsersOperatorKey]), string(passwords[resources.RedisUsersExporterKey]))
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, desired,
		child.MergeSecretKeeping(resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey))
	r.record(s, live, outcome, err)
	if err != nil {
		return nil, err
	}
	s.operatorPassword = string(live.Data[resources.RedisUsersOperatorKey])
	return nil, nil
}

// login is how the operator authenticates to the nodes: as the default user with the
// password Secret's password, or with ACL users as resources.RedisOperatorUser.
func (s *state) login() redisadmin.Login {
	if resources.RedisACLEnabled(s.rc) {
		return redisadmin.Login{User: resources.RedisOperatorUser, Password: s.operatorPassword}
	}
	return redisadmin.Login{Password: s.password}
}

// rotationLogin is the admin login of a password rotation: nil without ACL users (the
// default user rotates its own password and masterauth follows it), else the operator's.
func (s *state) rotationLogin() *redisadmin.Login {
	if !resources.RedisACLEnabled(s.rc) {
		return nil
	}
	l := s.login()
	return &l
}
