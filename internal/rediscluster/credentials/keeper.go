package credentials

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// DefaultGrace is how long both passwords work during a rotation: longer than a kubelet
// takes to refresh a changed Secret volume (its sync period plus its cache TTL, a minute
// each by default), so every pod's readiness probe reads the new password before the old
// one stops working.
const DefaultGrace = 2 * time.Minute

// Keeper reads and keeps the password Secrets and applied-password records of
// RedisClusters, and carries out their rotations. Client, Scheme, Recorder and UserObject
// must be set.
type Keeper struct {
	// Client reads the operator's own Secrets (from the cache) and writes.
	Client client.Client
	Scheme *runtime.Scheme
	// Recorder sends the events of rotations and missing Secrets.
	Recorder events.EventRecorder
	// UserObject reads a Secret the user names (spec.passwordSecret,
	// spec.acl.users[].passwordSecret): not the operator's, so not in its cache.
	UserObject func(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	// Grace is how long both passwords work during a rotation (DefaultGrace when 0).
	Grace time.Duration
}

// grace is k.Grace, or DefaultGrace when it is not positive.
func (k *Keeper) grace() time.Duration {
	if k.Grace > 0 {
		return k.Grace
	}
	return DefaultGrace
}

// Rotation is rc's credentials as the planner takes them (Rotation with k's grace).
func (k *Keeper) Rotation(rc *redisv1alpha1.RedisCluster, f *Facts) plan.Rotation {
	return Rotation(rc, f, k.grace())
}

// ReadPassword reads the password Secret without changing anything (a paused cluster is
// still read); an invalid value leaves f.Password unset, EnsurePassword reports it.
func (k *Keeper) ReadPassword(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	get := k.Client.Get
	if rc.Spec.PasswordSecret != "" {
		get = k.UserObject
	}
	secret := &corev1.Secret{}
	err := get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisPasswordSecretName(rc)}, secret)
	if err == nil {
		f.Password, _ = secretPassword(secret, resources.RedisPasswordKey)
	}
	return client.IgnoreNotFound(err)
}

// EnsurePassword reads the user's password Secret, or keeps (creating it once) the
// generated one. Once the cluster is formed a lost generated Secret is not made again: the
// nodes run with the lost password (a *report.PasswordLostError).
func (k *Keeper) EnsurePassword(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, formed bool) error {
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisPasswordSecretName(rc)}
	if rc.Spec.PasswordSecret != "" {
		if f.Password != "" { // ReadPassword found it
			return nil
		}
		secret := &corev1.Secret{}
		if err := k.UserObject(ctx, key, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return &child.MissingError{Msg: fmt.Sprintf("spec.passwordSecret: Secret %q not found: create it with a %q key", key.Name, resources.RedisPasswordKey)}
			}
			return fmt.Errorf("while reading Secret %s: %w", key.Name, err)
		}
		if len(secret.Data[resources.RedisPasswordKey]) == 0 {
			return fmt.Errorf("spec.passwordSecret: Secret %q has no %q key", key.Name, resources.RedisPasswordKey)
		}
		password, err := secretPassword(secret, resources.RedisPasswordKey)
		if err != nil {
			return err
		}
		f.Password = password
		return nil
	}
	kept, err := child.KeptSecretValue(ctx, k.Client, rc, key, resources.RedisPasswordKey)
	if err != nil {
		return err
	}
	if kept == nil && formed {
		// The nodes run with the lost password: a new one would lock the operator out and
		// break replication for every pod restarted later.
		return &report.PasswordLostError{Secret: key.Name}
	}
	if kept == nil {
		if kept, err = child.NewPassword(); err != nil {
			return err
		}
	}
	live, outcome, err := child.Ensure(ctx, k.Client, k.Scheme, rc, resources.RedisPasswordSecret(rc, string(kept)),
		child.MergeSecretKeeping(resources.RedisPasswordKey))
	child.RecordOutcome(k.Recorder, rc, rc.Status.Conditions, live, outcome, err)
	if err != nil {
		return err
	}
	password, err := secretPassword(live, resources.RedisPasswordKey)
	if err != nil {
		return err
	}
	f.Password = password
	return nil
}

// ReadApplied reads the applied-password records (from the cache: they are the operator's
// own): what the nodes run with, which the operator logs in with and rotations start from.
func (k *Keeper) ReadApplied(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	f.Applied = map[string]*corev1.Secret{}
	for _, c := range f.list(rc) {
		applied := &corev1.Secret{}
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: c.record}, applied); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("while reading Secret %s: %w", c.record, err)
			}
			continue
		}
		f.Applied[c.record] = applied
	}
	return nil
}

// ReadUsers reads the passwords of a cluster with ACL users without changing anything: the
// users Secret, and the password the nodes run the operator's user with (its
// applied-password record, read by ReadApplied; the Secret's until the first rotation step
// wrote one).
func (k *Keeper) ReadUsers(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	if !resources.RedisACLEnabled(rc) {
		return nil
	}
	secret := &corev1.Secret{}
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisUsersSecretName(rc)}, secret)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	f.setUsers(secret)
	if applied := f.Applied[resources.RedisUserAppliedSecretName(rc, resources.RedisUsersOperatorKey)]; applied != nil {
		f.OperatorPasswords = []string{string(applied.Data[resources.RedisPasswordKey]), string(applied.Data[resources.RedisPreviousPasswordKey])}
	}
	return nil
}

// setUsers keeps the users Secret's passwords, and takes the operator's as the one to log in
// with until its applied-password record says otherwise.
func (f *Facts) setUsers(secret *corev1.Secret) {
	f.Users = map[string]string{}
	for k := range secret.Data {
		if password, err := secretPassword(secret, k); err == nil { // EnsureUsers reports an invalid one
			f.Users[k] = password
		}
	}
	if len(f.OperatorPasswords) == 0 {
		f.OperatorPasswords = []string{f.Users[resources.RedisUsersOperatorKey]}
	}
}

// EnsureUsers keeps the users Secret of a cluster with ACL users: the operator's and the
// exporter's passwords, generated once and kept; a password changed by hand is kept too, and
// rotated onto the nodes. Once the cluster is formed a lost Secret is not generated again:
// the nodes run with the lost passwords.
func (k *Keeper) EnsureUsers(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, formed bool) error {
	if !resources.RedisACLEnabled(rc) {
		return nil
	}
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisUsersSecretName(rc)}
	keys := []string{resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey}
	passwords, err := child.KeptSecretValues(ctx, k.Client, rc, key, keys...)
	if err != nil {
		return err
	}
	if len(passwords) < len(keys) && formed {
		return &report.PasswordLostError{Secret: key.Name, Users: true}
	}
	if passwords == nil {
		passwords = map[string][]byte{}
	}
	for _, name := range keys {
		if passwords[name] == nil {
			if passwords[name], err = child.NewPassword(); err != nil {
				return err
			}
		}
	}
	desired := resources.RedisUsersSecret(rc, string(passwords[resources.RedisUsersOperatorKey]), string(passwords[resources.RedisUsersExporterKey]))
	live, outcome, err := child.Ensure(ctx, k.Client, k.Scheme, rc, desired,
		child.MergeSecretKeeping(resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey))
	child.RecordOutcome(k.Recorder, rc, rc.Status.Conditions, live, outcome, err)
	if err != nil {
		return err
	}
	for _, name := range keys {
		if _, err := secretPassword(live, name); err != nil {
			return err
		}
	}
	f.setUsers(live)
	return nil
}

// ReadACLUsers reads the passwords of spec.acl.users from their Secrets into
// f.ACLPasswords, leaving out the ones it cannot read: EnsureACLUsers reports them. Their
// rotation starts from these.
func (k *Keeper) ReadACLUsers(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	_, err := k.aclUserPasswords(ctx, rc, f)
	return err
}

// EnsureACLUsers checks the password Secrets of spec.acl.users before any pod is made to
// mount them: each must exist and hold a password at its key. A missing one is a
// *child.MissingError (Degraded names the field; a Warning event when it is new), looked
// for again after a bounded delay.
func (k *Keeper) EnsureACLUsers(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	problem, err := k.aclUserPasswords(ctx, rc, f)
	if err != nil {
		return err
	}
	var missing *child.MissingError
	if errors.As(problem, &missing) && rc.Status.Reason != missing.Msg {
		k.Recorder.Eventf(rc, nil, corev1.EventTypeWarning, report.ReasonUserSecretMissing, "Configure", "%s", missing.Msg)
	}
	return problem
}

// aclUserPasswords reads the password of each user of spec.acl.users into f.ACLPasswords.
// It returns the first user whose Secret is missing, lacks the key (a *child.MissingError
// naming the field) or holds no password (a *report.PasswordInvalidError) as problem, and
// err for a failed read.
func (k *Keeper) aclUserPasswords(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) (problem, err error) {
	f.ACLPasswords = map[string]string{}
	if !resources.RedisACLEnabled(rc) {
		return nil, nil
	}
	for i, u := range rc.Spec.ACL.Users {
		key := resources.RedisACLUserSecretKey(u)
		field := fmt.Sprintf("spec.acl.users[%d].passwordSecret", i)
		secret := &corev1.Secret{}
		err := k.UserObject(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: u.PasswordSecret.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			problem = cmp.Or(problem, error(&child.MissingError{Msg: fmt.Sprintf("%s: Secret %q of user %s not found: create it with a %q key",
				field, u.PasswordSecret.Name, u.Name, key)}))
			continue
		case err != nil:
			return nil, fmt.Errorf("while reading Secret %s: %w", u.PasswordSecret.Name, err)
		case len(secret.Data[key]) == 0:
			problem = cmp.Or(problem, error(&child.MissingError{Msg: fmt.Sprintf("%s: Secret %q of user %s has no %q key: add the user's password there",
				field, u.PasswordSecret.Name, u.Name, key)}))
			continue
		}
		password, err := secretPassword(secret, key)
		if err != nil {
			problem = cmp.Or(problem, err)
			continue
		}
		f.ACLPasswords[u.Name] = password
	}
	return problem, nil
}
