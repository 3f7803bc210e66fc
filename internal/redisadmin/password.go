package redisadmin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
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

// Login is a Redis user and its password; User "" is the default user.
type Login struct {
	User, Password string
}

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
	conn, err := dialAuthenticated(ctx, addr, tlsConfig, c.As, c.AsPasswords)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.Do(ctx, "ACL", "SETUSER", c.User, "on", ">"+c.New).Err(); err != nil {
		return fmt.Errorf("while adding the new password on %s (ACL SETUSER %s): %s", addr, c.User, redact(err, c.New))
	}
	if c.MasterAuth {
		if err := conn.Do(ctx, "CONFIG", "SET", "masterauth", c.New).Err(); err != nil {
			return fmt.Errorf("while setting masterauth on %s: %s", addr, redact(err, c.New))
		}
	}
	return nil
}

// KeepOnlyPassword makes c.New the only password c.User has on the node at addr (ACL SETUSER
// user on resetpass >new), with c.MasterAuth masterauth first. It is idempotent.
func KeepOnlyPassword(ctx context.Context, addr string, tlsConfig *tls.Config, c PasswordChange) error {
	conn, err := dialAuthenticated(ctx, addr, tlsConfig, c.As, c.AsPasswords)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if c.MasterAuth {
		if err := conn.Do(ctx, "CONFIG", "SET", "masterauth", c.New).Err(); err != nil {
			return fmt.Errorf("while setting masterauth on %s: %s", addr, redact(err, c.New))
		}
	}
	if err := conn.Do(ctx, "ACL", "SETUSER", c.User, "on", "resetpass", ">"+c.New).Err(); err != nil {
		return fmt.Errorf("while removing the old passwords on %s (ACL SETUSER %s): %s", addr, c.User, redact(err, c.New))
	}
	return nil
}

// Accepts reports whether the node at addr accepts login: a new connection's AUTH
// succeeds. An error means the node could not be asked.
func Accepts(ctx context.Context, addr string, tlsConfig *tls.Config, login Login) (bool, error) {
	c, err := dialAuthenticated(ctx, addr, tlsConfig, login.User, []string{login.Password})
	if err == nil {
		_ = c.Close()
		return true, nil
	}
	if errors.Is(err, ErrWrongPassword) {
		return false, nil
	}
	return false, err
}

// ErrWrongPassword is wrapped by errors of nodes that refused every password offered.
var ErrWrongPassword = errors.New("the node refuses the password")

// dialAuthenticated opens a connection to addr authenticated as user ("" for the default
// user) with the first of passwords the node accepts.
func dialAuthenticated(ctx context.Context, addr string, tlsConfig *tls.Config, user string, passwords []string) (*goredis.Client, error) {
	var last error
	for _, pw := range passwords {
		if pw == "" {
			continue
		}
		opts := nodeOptions(addr, Login{user, pw}, tlsConfig, 2*time.Second, 1)
		opts.ReadTimeout, opts.WriteTimeout = 5*time.Second, 5*time.Second
		c := goredis.NewClient(opts)
		err := c.Ping(ctx).Err()
		if err == nil {
			return c, nil
		}
		_ = c.Close()
		if !IsAuthError(err) {
			return nil, fmt.Errorf("while connecting to %s: %s", addr, redact(err, pw))
		}
		last = err
	}
	if last == nil {
		return nil, fmt.Errorf("while connecting to %s: no password to offer", addr)
	}
	return nil, fmt.Errorf("%s: %w", addr, ErrWrongPassword)
}

// redact returns err's text with secret replaced, so no error can carry a password.
func redact(err error, secret string) string {
	if secret == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), secret, "<password>")
}
