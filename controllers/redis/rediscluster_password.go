package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// DefaultPasswordGrace is how long both passwords work during a rotation: longer than a
// kubelet takes to refresh a changed Secret volume (its sync period plus its cache TTL, a
// minute each by default), so every pod's readiness probe reads the new password before
// the old one stops working.
const DefaultPasswordGrace = 2 * time.Minute

// credential is a Redis user's password that the operator keeps every node on: the
// application's (the default user's, from the password Secret) and, with spec.acl, the
// operator's and the exporter's (from the users Secret) and those of spec.acl.users (from
// their Secrets).
type credential struct {
	user    string // the Redis user
	desired string // the password its Secret holds now
	source  string // that Secret, for messages and events
	record  string // its applied-password record
	// masterAuth: replicas authenticate to their masters as this user.
	masterAuth bool
	// applied is the applied-password record as read (nil: none).
	applied *corev1.Secret
}

// withRecords attaches to each credential its applied-password record as read.
func (s *state) withRecords(creds []credential) []credential {
	for i := range creds {
		creds[i].applied = s.applied[creds[i].record]
	}
	return creds
}

// credentials lists the cluster's credentials, the operator's first: the steps of the
// others authenticate as the operator's user, with the passwords its rotation leaves.
func (s *state) credentials() []credential {
	app := credential{user: "default", desired: s.password, source: resources.RedisPasswordSecretName(s.rc),
		record: resources.RedisAppliedPasswordSecretName(s.rc), masterAuth: !resources.RedisACLEnabled(s.rc)}
	if !resources.RedisACLEnabled(s.rc) {
		return s.withRecords([]credential{app})
	}
	users := resources.RedisUsersSecretName(s.rc)
	creds := []credential{
		{user: resources.RedisOperatorUser, desired: s.users[resources.RedisUsersOperatorKey], source: users,
			record: resources.RedisUserAppliedSecretName(s.rc, resources.RedisUsersOperatorKey), masterAuth: true},
		app,
		{user: resources.RedisExporterUser, desired: s.users[resources.RedisUsersExporterKey], source: users,
			record: resources.RedisUserAppliedSecretName(s.rc, resources.RedisUsersExporterKey)},
	}
	for _, u := range s.rc.Spec.ACL.Users {
		creds = append(creds, credential{user: u.Name, desired: s.aclPasswords[u.Name], source: u.PasswordSecret.Name,
			record: resources.RedisACLUserAppliedSecretName(s.rc, u.Name)})
	}
	return s.withRecords(creds)
}

// readApplied reads the applied-password records (from the cache: they are the operator's
// own): what the nodes run with, which the operator logs in with and rotations start from.
func (r *RedisClusterReconciler) readApplied(ctx context.Context, s *state) error {
	s.applied = map[string]*corev1.Secret{}
	for _, c := range s.credentials() {
		applied := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: c.record}, applied); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("while reading Secret %s: %w", c.record, err)
			}
			continue
		}
		s.applied[c.record] = applied
	}
	return nil
}

// rotation is the credentials as the planner takes them.
func (r *RedisClusterReconciler) rotation(s *state) plan.Rotation {
	out := plan.Rotation{Grace: r.passwordGrace()}
	for _, c := range s.credentials() {
		pc := plan.Credential{User: c.user, Source: c.source, Desired: c.desired}
		if c.applied != nil {
			current := string(c.applied.Data[resources.RedisPasswordKey])
			pc.Recorded, pc.Current, pc.Previous = true, current, string(c.applied.Data[resources.RedisPreviousPasswordKey])
			pc.SwitchedAt, _ = time.Parse(time.RFC3339, c.applied.Annotations[resources.RedisPasswordSwitchedAnnotation])
			pc.UpToDate = bytes.Equal(c.applied.Data[resources.RedisExporterPasswordFileKey], resources.RedisExporterPasswordJSON(current))
		}
		out.Credentials = append(out.Credentials, pc)
	}
	return out
}

// writeRecord writes a credential's applied-password record as the step says.
func (r *RedisClusterReconciler) writeRecord(ctx context.Context, s *state) error {
	c, rec := s.credentials()[s.step.Credential], s.step.Record
	return r.writeApplied(ctx, s, c, c.applied, rec.Current, rec.Previous, rec.SwitchedAt)
}

// addPassword makes every running node accept the credential's new password besides the
// current one, and the user replicas authenticate as use it with their masters
// (execute.AddPassword); once every one has, the record says so and the grace period
// starts. A node that does not answer is waited for.
func (r *RedisClusterReconciler) addPassword(ctx context.Context, s *state) error {
	c := s.credentials()[s.step.Credential]
	current, previous := string(c.applied.Data[resources.RedisPasswordKey]), string(c.applied.Data[resources.RedisPreviousPasswordKey])
	change := s.passwordChange(c, []string{current, previous, c.desired})
	var missing []string
	for _, addr := range s.step.Addrs {
		if silent, err := rotationStep(execute.AddPassword(ctx, addr, s.certs.Config, change)); err != nil {
			return fmt.Errorf("while adding the new password of Secret %s (user %s): %w", c.source, c.user, err)
		} else if silent {
			missing = append(missing, addr)
		}
	}
	prefix := fmt.Sprintf("rotating user %s to the password of Secret %s: ", c.user, c.source)
	if len(missing) > 0 {
		s.step.Rotation = prefix + fmt.Sprintf("%d nodes accept it; waiting for %s to answer", len(s.step.Addrs)-len(missing), strings.Join(missing, ", "))
		return nil
	}
	now := time.Now()
	if err := r.writeApplied(ctx, s, c, c.applied, c.desired, current, now); err != nil {
		return err
	}
	r.event(s, corev1.EventTypeNormal, "PasswordRotating", "Rotate",
		"every node accepts the new password of user %s from Secret %s; the previous password stops working after %s", c.user, c.source, r.passwordGrace())
	s.step.Rotation = prefix + "every node accepts both passwords until " + now.Add(r.passwordGrace()).UTC().Format(time.RFC3339)
	return nil
}

// keepOnlyPassword makes every running node refuse the credential's previous password
// (execute.KeepOnlyPassword), checks that none accepts it any more, and records that the
// rotation is over.
func (r *RedisClusterReconciler) keepOnlyPassword(ctx context.Context, s *state) error {
	c := s.credentials()[s.step.Credential]
	previous := string(c.applied.Data[resources.RedisPreviousPasswordKey])
	change := s.passwordChange(c, []string{c.desired, previous})
	var missing []string
	for _, addr := range s.step.Addrs {
		if silent, err := rotationStep(execute.KeepOnlyPassword(ctx, addr, s.certs.Config, change)); err != nil {
			return fmt.Errorf("while retiring the previous password of user %s: %w", c.user, err)
		} else if silent {
			missing = append(missing, addr)
		}
	}
	if len(missing) > 0 {
		s.step.Rotation = fmt.Sprintf("rotating user %s to the password of Secret %s: waiting for %s to answer before the previous password is retired",
			c.user, c.source, strings.Join(missing, ", "))
		return nil
	}
	for _, addr := range s.step.Addrs {
		ok, err := conn.Accepts(ctx, addr, s.certs.Config, conn.Login{User: c.user, Password: previous})
		if err != nil {
			return fmt.Errorf("while checking that the previous password of user %s was retired: %w", c.user, err)
		}
		if ok {
			return fmt.Errorf("the node at %s still accepts the previous password of user %s after it was retired", addr, c.user)
		}
	}
	if err := r.writeApplied(ctx, s, c, c.applied, c.desired, "", time.Time{}); err != nil {
		return err
	}
	r.event(s, corev1.EventTypeNormal, "PasswordRotated", "Rotate",
		"every node requires the password of user %s from Secret %s; the previous password no longer works", c.user, c.source)
	return nil
}

// passwordChange is the step that moves c to its desired password: as c's user itself with
// the first of own its node accepts, or with ACL users as the operator's user.
func (s *state) passwordChange(c credential, own []string) execute.PasswordChange {
	change := execute.PasswordChange{User: c.user, AsPasswords: own, New: c.desired, MasterAuth: c.masterAuth}
	if resources.RedisACLEnabled(s.rc) {
		change.As = resources.RedisOperatorUser
		if c.user != resources.RedisOperatorUser {
			change.AsPasswords = s.operatorPasswords
		}
	}
	return change
}

// rotationStep sorts the outcome of a rotation step on one node: a node that refuses every
// password offered is an error (it runs a password the operator never knew); one that does
// not answer (starting, held by its start guard, down) is silent, waited for without
// stopping the healing steps after this one.
func rotationStep(err error) (silent bool, _ error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, conn.ErrWrongPassword):
		return false, err
	default:
		return true, nil
	}
}

func (r *RedisClusterReconciler) passwordGrace() time.Duration {
	if r.PasswordGrace > 0 {
		return r.PasswordGrace
	}
	return DefaultPasswordGrace
}

// writeApplied creates or updates c's applied-password record.
func (r *RedisClusterReconciler) writeApplied(ctx context.Context, s *state, c credential, live *corev1.Secret, password, previous string, switchedAt time.Time) error {
	desired := resources.RedisAppliedPasswordSecret(s.rc, c.record, password, previous, switchedAt)
	if err := controllerutil.SetControllerReference(s.rc, desired, r.Scheme); err != nil {
		return err
	}
	if live == nil {
		if err := r.Create(ctx, desired); err != nil {
			return fmt.Errorf("while creating Secret %s: %w", desired.Name, err)
		}
		return nil
	}
	live = live.DeepCopy()
	live.Data, live.Annotations = desired.Data, desired.Annotations
	if err := r.Update(ctx, live); err != nil {
		return fmt.Errorf("while updating Secret %s: %w", desired.Name, err)
	}
	return nil
}
