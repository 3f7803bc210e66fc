package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// readUsers reads the passwords of a cluster with ACL users without changing anything, so a
// paused cluster's status can still be read from Redis: the users Secret, and the password
// the nodes run the operator's user with (its applied-password record, read by readApplied;
// the Secret's until the first rotation step wrote one).
func (r *RedisClusterReconciler) readUsers(ctx context.Context, s *state) error {
	if !resources.RedisACLEnabled(s.rc) {
		return nil
	}
	secret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisUsersSecretName(s.rc)}, secret)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	s.setUsers(secret)
	if applied := s.applied[resources.RedisUserAppliedSecretName(s.rc, resources.RedisUsersOperatorKey)]; applied != nil {
		s.operatorPasswords = []string{string(applied.Data[resources.RedisPasswordKey]), string(applied.Data[resources.RedisPreviousPasswordKey])}
	}
	return nil
}

// setUsers keeps the users Secret's passwords, and takes the operator's as the one to log in
// with until its applied-password record says otherwise.
func (s *state) setUsers(secret *corev1.Secret) {
	s.users = map[string]string{}
	for k := range secret.Data {
		if password, err := secretPassword(secret, k); err == nil { // ensureUsers reports an invalid one
			s.users[k] = password
		}
	}
	if len(s.operatorPasswords) == 0 {
		s.operatorPasswords = []string{s.users[resources.RedisUsersOperatorKey]}
	}
}

// ensureUsers keeps the users Secret of a cluster with ACL users: the operator's and the
// exporter's passwords, generated once and kept; a password changed by hand is kept too, and
// rotated onto the nodes (rotatePasswords). Once the cluster is formed a lost Secret is not
// generated again: the nodes run with the lost passwords.
func (r *RedisClusterReconciler) ensureUsers(ctx context.Context, s *state) error {
	if !resources.RedisACLEnabled(s.rc) {
		return nil
	}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisUsersSecretName(s.rc)}
	keys := []string{resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey}
	passwords, err := child.KeptSecretValues(ctx, r.Client, s.rc, key, keys...)
	if err != nil {
		return err
	}
	if len(passwords) < len(keys) && len(s.recorded) > 0 {
		return &report.PasswordLostError{Secret: key.Name, Users: true}
	}
	if passwords == nil {
		passwords = map[string][]byte{}
	}
	for _, k := range keys {
		if passwords[k] == nil {
			if passwords[k], err = child.NewPassword(); err != nil {
				return err
			}
		}
	}
	desired := resources.RedisUsersSecret(s.rc, string(passwords[resources.RedisUsersOperatorKey]), string(passwords[resources.RedisUsersExporterKey]))
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, desired,
		child.MergeSecretKeeping(resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey))
	r.record(s, live, outcome, err)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := secretPassword(live, k); err != nil {
			return err
		}
	}
	s.setUsers(live)
	return nil
}

// login is how the operator authenticates to the nodes: as the default user with the
// password every node accepts (its applied-password record's, the Secret's before there is
// one), or with ACL users as resources.RedisOperatorUser.
func (s *state) login() conn.Login {
	if resources.RedisACLEnabled(s.rc) {
		login := conn.Login{User: resources.RedisOperatorUser}
		if len(s.operatorPasswords) > 0 {
			login.Password = s.operatorPasswords[0] // the one every node accepts
		}
		return login
	}
	if applied := s.applied[resources.RedisAppliedPasswordSecretName(s.rc)]; applied != nil && len(applied.Data[resources.RedisPasswordKey]) > 0 {
		return conn.Login{Password: string(applied.Data[resources.RedisPasswordKey])} // the one every node accepts
	}
	return conn.Login{Password: s.password}
}

// readACLUsers reads the passwords of spec.acl.users from their Secrets into
// s.aclPasswords, leaving out the ones it cannot read: ensureACLUsers reports them. Their
// rotation (credentials) starts from these.
func (r *RedisClusterReconciler) readACLUsers(ctx context.Context, s *state) error {
	_, err := r.aclUserPasswords(ctx, s)
	return err
}

// ensureACLUsers checks the password Secrets of spec.acl.users before any pod is made to
// mount them: each must exist and hold a password at its key. A missing one is reported
// (Degraded, naming the field, and an event) and looked for again after a bounded delay.
func (r *RedisClusterReconciler) ensureACLUsers(ctx context.Context, s *state) error {
	problem, err := r.aclUserPasswords(ctx, s)
	if err != nil {
		return err
	}
	var missing *userObjectMissingError
	if errors.As(problem, &missing) {
		if s.rc.Status.Reason != missing.msg {
			r.event(s, corev1.EventTypeWarning, report.ReasonUserSecretMissing, "Configure", "%s", missing.msg)
		}
	}
	return problem
}

// aclUserPasswords reads the password of each user of spec.acl.users into s.aclPasswords.
// It returns the first user whose Secret is missing, lacks the key (a
// *userObjectMissingError naming the field) or holds no password (a
// *report.PasswordInvalidError) as problem, and err for a failed read.
func (r *RedisClusterReconciler) aclUserPasswords(ctx context.Context, s *state) (problem, err error) {
	s.aclPasswords = map[string]string{}
	if !resources.RedisACLEnabled(s.rc) {
		return nil, nil
	}
	for i, u := range s.rc.Spec.ACL.Users {
		key := resources.RedisACLUserSecretKey(u)
		field := fmt.Sprintf("spec.acl.users[%d].passwordSecret", i)
		secret := &corev1.Secret{}
		err := r.userObject(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: u.PasswordSecret.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			problem = cmp.Or(problem, error(&userObjectMissingError{fmt.Sprintf("%s: Secret %q of user %s not found: create it with a %q key",
				field, u.PasswordSecret.Name, u.Name, key)}))
			continue
		case err != nil:
			return nil, fmt.Errorf("while reading Secret %s: %w", u.PasswordSecret.Name, err)
		case len(secret.Data[key]) == 0:
			problem = cmp.Or(problem, error(&userObjectMissingError{fmt.Sprintf("%s: Secret %q of user %s has no %q key: add the user's password there",
				field, u.PasswordSecret.Name, u.Name, key)}))
			continue
		}
		password, err := secretPassword(secret, key)
		if err != nil {
			problem = cmp.Or(problem, err)
			continue
		}
		s.aclPasswords[u.Name] = password
	}
	return problem, nil
}
