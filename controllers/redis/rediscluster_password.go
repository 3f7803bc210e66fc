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

	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// DefaultPasswordGrace is how long both passwords work during a rotation: longer than a
// kubelet takes to refresh a changed Secret volume (its sync period plus its cache TTL, a
// minute each by default), so every pod's readiness probe reads the new password before
// the old one stops working.
const DefaultPasswordGrace = 2 * time.Minute

// credential is a Redis user's password that the operator keeps every node on: the
// application's (the default user's, from the password Secret) and, with spec.acl, the
// operator's and the exporter's (from the users Secret).
type credential struct {
	user    string // the Redis user
	desired string // the password its Secret holds now
	source  string // that Secret, for messages and events
	record  string // its applied-password record
	// masterAuth: replicas authenticate to their masters as this user.
	masterAuth bool
}

// credentials lists the cluster's credentials, the operator's first: the steps of the
// others authenticate as the operator's user, with the passwords its rotation leaves.
func (s *state) credentials() []credential {
	app := credential{user: "default", desired: s.password, source: resources.RedisPasswordSecretName(s.rc),
		record: resources.RedisAppliedPasswordSecretName(s.rc), masterAuth: !resources.RedisACLEnabled(s.rc)}
	if !resources.RedisACLEnabled(s.rc) {
		return []credential{app}
	}
	users := resources.RedisUsersSecretName(s.rc)
	return []credential{
		{user: resources.RedisOperatorUser, desired: s.users[resources.RedisUsersOperatorKey], source: users,
			record: resources.RedisUserAppliedSecretName(s.rc, resources.RedisUsersOperatorKey), masterAuth: true},
		app,
		{user: resources.RedisExporterUser, desired: s.users[resources.RedisUsersExporterKey], source: users,
			record: resources.RedisUserAppliedSecretName(s.rc, resources.RedisUsersExporterKey)},
	}
}

// rotatePasswords brings the nodes to each credential's password (rotatePassword), one
// rotation at a time, the operator's first. s.rotation is rotationCurrent when every one is
// current, else what the rotation under way waits for.
func (r *RedisClusterReconciler) rotatePasswords(ctx context.Context, s *state) error {
	if s.password == "" {
		return nil
	}
	for _, c := range s.credentials() {
		if c.desired == "" {
			return nil
		}
		if err := r.rotatePassword(ctx, s, c); err != nil {
			return err
		}
		if s.rotation != rotationCurrent {
			// One rotation at a time: the others authenticate as the operator's user,
			// whose password must be settled first.
			return nil
		}
	}
	return nil
}

// rotatePassword brings the nodes to c's password when it differs from the one they run
// with (recorded in c's applied-password record), without downtime: first every node
// accepts both and, for the user replicas authenticate as, uses the new one with its master
// (redisadmin.AddPassword); after the grace period every node keeps only the new one
// (redisadmin.KeepOnlyPassword), which is verified, and the record is updated. Each stage
// needs every pod to answer; until then it waits and says so in s.rotation. When the
// passwords agree it reads one cached Secret and changes nothing. The steps authenticate as
// the user itself without ACL users, else as the operator's user.
func (r *RedisClusterReconciler) rotatePassword(ctx context.Context, s *state, c credential) error {
	applied := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: c.record}
	if err := r.Get(ctx, key, applied); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("while reading Secret %s: %w", key.Name, err)
		}
		// A new cluster, or one formed before rotations: its nodes run the Secret's password.
		s.rotation = rotationCurrent
		s.runsWith(c, c.desired)
		return r.writeApplied(ctx, s, c, nil, c.desired, "", time.Time{})
	}
	current := string(applied.Data[resources.RedisPasswordKey])
	previous := string(applied.Data[resources.RedisPreviousPasswordKey])
	s.runsWith(c, current, previous)
	if !bytes.Equal(applied.Data[resources.RedisExporterPasswordFileKey], resources.RedisExporterPasswordJSON(current)) {
		// Recorded by an operator from before the exporter's password file: add it, as it
		// is (the exporter sidecars of the new pod template mount it), and go on next time.
		switched, _ := time.Parse(time.RFC3339, applied.Annotations[resources.RedisPasswordSwitchedAnnotation])
		return r.writeApplied(ctx, s, c, applied, current, previous, switched)
	}
	switch {
	case current == c.desired && previous == "":
		s.rotation = rotationCurrent
		return nil
	case current != c.desired:
		addrs, missing, err := r.runningAddrs(ctx, s)
		if err != nil {
			return err
		}
		if err := r.fence(ctx); err != nil {
			return err
		}
		accepted := 0
		change := s.passwordChange(c, []string{current, previous, c.desired})
		for _, addr := range addrs {
			if silent, err := rotationStep(redisadmin.AddPassword(ctx, addr, s.tls, change)); err != nil {
				return fmt.Errorf("while adding the new password of Secret %s (user %s): %w", c.source, c.user, err)
			} else if silent {
				missing = append(missing, addr)
				continue
			}
			accepted++
		}
		if len(missing) > 0 {
			s.rotation = fmt.Sprintf("rotating user %s to the password of Secret %s: %d nodes accept it; waiting for %s to answer", c.user, c.source, accepted, strings.Join(missing, ", "))
			return nil
		}
		now := time.Now()
		if err := r.writeApplied(ctx, s, c, applied, c.desired, current, now); err != nil {
			return err
		}
		s.runsWith(c, c.desired, current)
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "PasswordRotating", "Rotate",
			"every node accepts the new password of user %s from Secret %s; the previous password stops working after %s", c.user, c.source, r.passwordGrace())
		s.rotation = fmt.Sprintf("rotating user %s to the password of Secret %s: every node accepts both passwords until %s", c.user, c.source, now.Add(r.passwordGrace()).UTC().Format(time.RFC3339))
		return nil
	}
	// Every node accepts both: after the grace period, retire the previous password.
	switched, _ := time.Parse(time.RFC3339, applied.Annotations[resources.RedisPasswordSwitchedAnnotation])
	if until := switched.Add(r.passwordGrace()); time.Now().Before(until) {
		s.rotation = fmt.Sprintf("rotating user %s to the password of Secret %s: every node accepts both passwords until %s", c.user, c.source, until.UTC().Format(time.RFC3339))
		return nil
	}
	addrs, missing, err := r.runningAddrs(ctx, s)
	if err != nil {
		return err
	}
	if err := r.fence(ctx); err != nil {
		return err
	}
	change := s.passwordChange(c, []string{c.desired, previous})
	for _, addr := range addrs {
		if silent, err := rotationStep(redisadmin.KeepOnlyPassword(ctx, addr, s.tls, change)); err != nil {
			return fmt.Errorf("while retiring the previous password of user %s: %w", c.user, err)
		} else if silent {
			missing = append(missing, addr)
		}
	}
	if len(missing) > 0 {
		s.rotation = fmt.Sprintf("rotating user %s to the password of Secret %s: waiting for %s to answer before the previous password is retired", c.user, c.source, strings.Join(missing, ", "))
		return nil
	}
	for _, addr := range addrs {
		ok, err := redisadmin.Accepts(ctx, addr, s.tls, redisadmin.Login{User: c.user, Password: previous})
		if err != nil {
			return fmt.Errorf("while checking that the previous password of user %s was retired: %w", c.user, err)
		}
		if ok {
			return fmt.Errorf("the node at %s still accepts the previous password of user %s after it was retired", addr, c.user)
		}
	}
	if err := r.writeApplied(ctx, s, c, applied, c.desired, "", time.Time{}); err != nil {
		return err
	}
	s.runsWith(c, c.desired)
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "PasswordRotated", "Rotate",
		"every node requires the password of user %s from Secret %s; the previous password no longer works", c.user, c.source)
	s.rotation = rotationCurrent
	return nil
}

// passwordChange is the step that moves c to its desired password: as c's user itself with
// the first of own its node accepts, or with ACL users as the operator's user.
func (s *state) passwordChange(c credential, own []string) redisadmin.PasswordChange {
	change := redisadmin.PasswordChange{User: c.user, AsPasswords: own, New: c.desired, MasterAuth: c.masterAuth}
	if resources.RedisACLEnabled(s.rc) {
		change.As = resources.RedisOperatorUser
		if c.user != resources.RedisOperatorUser {
			change.AsPasswords = s.operatorPasswords
		}
	}
	return change
}

// runsWith notes the passwords the nodes accept for the operator's user (the first one
// every node accepts), which the Redis admin and the other rotations authenticate with.
func (s *state) runsWith(c credential, passwords ...string) {
	if c.user == resources.RedisOperatorUser {
		s.operatorPasswords = passwords
	}
}

// rotationStep sorts the outcome of a rotation step on one node: a node that refuses every
// password offered is an error (it runs a password the operator never knew); one that does
// not answer (starting, held by its start guard, down) is silent, waited for without
// stopping the healing steps after this one.
func rotationStep(err error) (silent bool, _ error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, redisadmin.ErrWrongPassword):
		return false, err
	default:
		return true, nil
	}
}

// rotationCurrent is state.rotation when the nodes run exactly the Secret's password.
const rotationCurrent = "current"

func (r *RedisClusterReconciler) passwordGrace() time.Duration {
	if r.PasswordGrace > 0 {
		return r.PasswordGrace
	}
	return DefaultPasswordGrace
}

// runningAddrs lists the addresses of the cluster's running pods and the names of the pods
// the StatefulSet wants that do not run.
func (r *RedisClusterReconciler) runningAddrs(ctx context.Context, s *state) (addrs, missing []string, err error) {
	if err := r.listPods(ctx, s); err != nil {
		return nil, nil, err
	}
	running := map[string]bool{}
	for i := range s.pods {
		p := &s.pods[i]
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			addrs = append(addrs, podAddr(p))
			running[p.Name] = true
		}
	}
	if s.sts != nil && s.sts.Spec.Replicas != nil {
		for i := range int(*s.sts.Spec.Replicas) {
			if name := fmt.Sprintf("%s-%d", s.sts.Name, i); !running[name] {
				missing = append(missing, name)
			}
		}
	}
	return addrs, missing, nil
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
