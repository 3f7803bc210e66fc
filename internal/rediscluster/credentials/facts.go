// Package credentials keeps the passwords a RedisCluster's nodes run with: the
// application's (the password Secret, the user's or generated once), with spec.acl the
// operator's and the exporter's (the users Secret) and those of spec.acl.users (the
// user's Secrets), and for each an applied-password record saying what every node accepts.
// It reads them once per reconcile (Facts), keeps the generated ones, and carries out the
// planner's rotation steps (WriteRecord, AddPassword, KeepOnlyPassword) from one password
// to the next without a moment when a node or a client is locked out. A password is never
// logged, evented or put in the status.
package credentials

import (
	"bytes"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// Facts is what a reconcile read of a cluster's passwords.
type Facts struct {
	// Password is the password Secret's ("" while unread or invalid).
	Password string
	// Users holds the users Secret's passwords (with ACL users), by key.
	Users map[string]string
	// ACLPasswords holds the passwords of spec.acl.users whose Secret holds a valid one,
	// by user name.
	ACLPasswords map[string]string
	// OperatorPasswords are the passwords of resources.RedisOperatorUser (with ACL users)
	// nodes may accept now: the first is the one every node accepts, which the operator
	// authenticates with; a second is the one a rotation of it retires.
	OperatorPasswords []string
	// Applied are the applied-password records by name.
	Applied map[string]*corev1.Secret
}

// Login is how the operator authenticates to rc's nodes: as the default user with the
// password every node accepts (its applied-password record's, the Secret's before there is
// one), or with ACL users as resources.RedisOperatorUser.
func (f *Facts) Login(rc *redisv1alpha1.RedisCluster) conn.Login {
	if resources.RedisACLEnabled(rc) {
		login := conn.Login{User: resources.RedisOperatorUser}
		if len(f.OperatorPasswords) > 0 {
			login.Password = f.OperatorPasswords[0] // the one every node accepts
		}
		return login
	}
	if applied := f.Applied[resources.RedisAppliedPasswordSecretName(rc)]; applied != nil && len(applied.Data[resources.RedisPasswordKey]) > 0 {
		return conn.Login{Password: string(applied.Data[resources.RedisPasswordKey])} // the one every node accepts
	}
	return conn.Login{Password: f.Password}
}

// credential is a Redis user's password that the operator keeps every node on.
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

// list lists rc's credentials, the operator's first: the steps of the others authenticate
// as the operator's user, with the passwords its rotation leaves.
func (f *Facts) list(rc *redisv1alpha1.RedisCluster) []credential {
	app := credential{user: "default", desired: f.Password, source: resources.RedisPasswordSecretName(rc),
		record: resources.RedisAppliedPasswordSecretName(rc), masterAuth: !resources.RedisACLEnabled(rc)}
	creds := []credential{app}
	if resources.RedisACLEnabled(rc) {
		users := resources.RedisUsersSecretName(rc)
		creds = []credential{
			{user: resources.RedisOperatorUser, desired: f.Users[resources.RedisUsersOperatorKey], source: users,
				record: resources.RedisUserAppliedSecretName(rc, resources.RedisUsersOperatorKey), masterAuth: true},
			app,
			{user: resources.RedisExporterUser, desired: f.Users[resources.RedisUsersExporterKey], source: users,
				record: resources.RedisUserAppliedSecretName(rc, resources.RedisUsersExporterKey)},
		}
		for _, u := range rc.Spec.ACL.Users {
			creds = append(creds, credential{user: u.Name, desired: f.ACLPasswords[u.Name], source: u.PasswordSecret.Name,
				record: resources.RedisACLUserAppliedSecretName(rc, u.Name)})
		}
	}
	for i := range creds {
		creds[i].applied = f.Applied[creds[i].record]
	}
	return creds
}

// Rotation is rc's credentials as the planner takes them, with grace, how long both
// passwords work during a rotation.
func Rotation(rc *redisv1alpha1.RedisCluster, f *Facts, grace time.Duration) plan.Rotation {
	out := plan.Rotation{Grace: grace}
	for _, c := range f.list(rc) {
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

// secretPassword is the password of key of a password Secret (resources.RedisPassword), or
// a *report.PasswordInvalidError naming the Secret, the key and the character.
func secretPassword(secret *corev1.Secret, key string) (string, error) {
	password, err := resources.RedisPassword(secret.Data[key])
	var invalid *resources.PasswordError
	if errors.As(err, &invalid) {
		return "", &report.PasswordInvalidError{Secret: secret.Name, Key: key, Err: invalid}
	}
	return password, err
}
