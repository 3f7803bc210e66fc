package execute

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// A password rotation without downtime runs in two steps on every node, with a grace
// period between them long enough for every pod to see the new password in its Secret
// volume (its readiness probe and its start script read it there):
//
//  1. AddPassword: the user accepts the new password besides the old one, and, when
//     replicas authenticate to their masters as this user, the node uses the new one with
//     its master (masterauth). Masters accept both, so replication never breaks, nor does a
//     pod restarted with the new one.
//  2. KeepOnlyPassword: the user keeps only the new password; the old one stops working.
//
// Neither step is ever logged with its arguments.

// PasswordChange is one user's move to a new password, as a rotation step runs it on a
// node.
type PasswordChange struct {
	// User is the user whose password changes: "default" for the application's.
	User string
	// As is the user the step authenticates as ("" for the default user), with the first
	// of AsPasswords the node accepts.
	As          string
	AsPasswords []string
	// New is the new password.
	New string
	// MasterAuth: replicas authenticate to their masters as User, so masterauth follows.
	MasterAuth bool
}

// AddPassword makes the node at addr accept c.New for c.User as well as the passwords it
// has (ACL SETUSER user on >new), then with c.MasterAuth sets masterauth to it. It is
// idempotent. tlsConfig (nil: plain text) is the cluster's, as for every function here.
func AddPassword(ctx context.Context, addr string, tlsConfig *tls.Config, c PasswordChange) error {
	node, err := conn.Dial(ctx, addr, tlsConfig, c.As, c.AsPasswords)
	if err != nil {
		return err
	}
	defer func() { _ = node.Close() }()
	if err := node.Do(ctx, "ACL", "SETUSER", c.User, "on", ">"+c.New).Err(); err != nil {
		return fmt.Errorf("while adding the new password on %s (ACL SETUSER %s): %s", addr, c.User, conn.Redact(err, c.New))
	}
	if c.MasterAuth {
		if err := node.Do(ctx, "CONFIG", "SET", "masterauth", c.New).Err(); err != nil {
			return fmt.Errorf("while setting masterauth on %s: %s", addr, conn.Redact(err, c.New))
		}
	}
	return nil
}

// KeepOnlyPassword makes c.New the only password c.User has on the node at addr (ACL SETUSER
// user on resetpass >new), with c.MasterAuth masterauth first. It is idempotent.
func KeepOnlyPassword(ctx context.Context, addr string, tlsConfig *tls.Config, c PasswordChange) error {
	node, err := conn.Dial(ctx, addr, tlsConfig, c.As, c.AsPasswords)
	if err != nil {
		return err
	}
	defer func() { _ = node.Close() }()
	if c.MasterAuth {
		if err := node.Do(ctx, "CONFIG", "SET", "masterauth", c.New).Err(); err != nil {
			return fmt.Errorf("while setting masterauth on %s: %s", addr, conn.Redact(err, c.New))
		}
	}
	if err := node.Do(ctx, "ACL", "SETUSER", c.User, "on", "resetpass", ">"+c.New).Err(); err != nil {
		return fmt.Errorf("while removing the old passwords on %s (ACL SETUSER %s): %s", addr, c.User, conn.Redact(err, c.New))
	}
	return nil
}
