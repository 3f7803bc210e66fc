package report

import (
	"fmt"

	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// PasswordInvalidError: a password Secret's value is not a password (resources.RedisPassword).
// The Degraded and PasswordApplied conditions name it.
type PasswordInvalidError struct {
	// Secret and Key name the value; Err says what is wrong with it.
	Secret, Key string
	Err         *resources.PasswordError
}

// Error names the Secret, the key and what is wrong.
func (e *PasswordInvalidError) Error() string {
	return fmt.Sprintf("the password in Secret %q, key %q, %s", e.Secret, e.Key, e.Err.Error())
}

// PasswordLostError: the generated password Secret (or with users the users Secret) of a
// formed cluster is gone. The Degraded condition names it.
type PasswordLostError struct {
	// Secret is the Secret's name; Users: it is the users Secret (spec.acl).
	Secret string
	Users  bool
}

// Error says what was lost and how to recover.
func (e *PasswordLostError) Error() string {
	if e.Users {
		return fmt.Sprintf("the users Secret %q of a formed cluster was deleted, and the operator does not generate new passwords over running nodes: "+
			"recreate it with the passwords the nodes run with (keys %q and %q), or create a new RedisCluster", e.Secret, resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey)
	}
	return fmt.Sprintf("the password Secret %q of a formed cluster was deleted, and the operator does not generate a new password over running nodes: "+
		"create a Secret of your own with the password the nodes run with (key %q) and name it in spec.passwordSecret", e.Secret, resources.RedisPasswordKey)
}
