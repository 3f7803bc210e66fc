package redis

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
// volume (its readiness probe reads it there):
//
//  1. AddPassword: the node's default user accepts the new password besides the old one,
//     and the node authenticates to its master with the new one (masterauth). Masters
//     accept both, so replication never breaks, nor does a pod restarted with the new one.
//  2. KeepOnlyPassword: the default user keeps only the new password; the old one stops
//     working.
//
// With ACL users (an admin Login), the steps run as the admin user, and masterauth is left
// alone: replicas then authenticate to their masters as that user, not with the password
// being rotated.
//
// Neither step is ever logged with its arguments.

// Login is a Redis user and its password; User "" is the default user.
type Login struct {
	User, Password string
}

// AddPassword makes the node at addr accept newPassword as well as the password it has:
// ACL SETUSER default on >new, then CONFIG SET masterauth new. It authenticates with the
// first of passwords the node accepts. It is idempotent. tlsConfig (nil: plain text) is the
// cluster's, as for every function here. With admin set it authenticates as admin instead
// and leaves masterauth alone.
func AddPassword(ctx context.Context, addr string, tlsConfig *tls.Config, admin *Login, passwords []string, newPassword string) error {
	c, err := dialRotating(ctx, addr, tlsConfig, admin, passwords)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.Do(ctx, "ACL", "SETUSER", "default", "on", ">"+newPassword).Err(); err != nil {
		return fmt.Errorf("while adding the new password on %s (ACL SETUSER default): %s", addr, redact(err, newPassword))
	}
	if admin != nil {
		return nil
	}
	if err := c.Do(ctx, "CONFIG", "SET", "masterauth", newPassword).Err(); err != nil {
		return fmt.Errorf("while setting masterauth on %s: %s", addr, redact(err, newPassword))
	}
	return nil
}

// KeepOnlyPassword makes password the only one the node at addr accepts (ACL SETUSER
// default on resetpass >password), authenticated with password, and sets masterauth to it.
// It is idempotent. With admin set it authenticates as admin and leaves masterauth alone.
func KeepOnlyPassword(ctx context.Context, addr string, tlsConfig *tls.Config, admin *Login, password string) error {
	c, err := dialRotating(ctx, addr, tlsConfig, admin, []string{password})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if admin == nil {
		if err := c.Do(ctx, "CONFIG", "SET", "masterauth", password).Err(); err != nil {
			return fmt.Errorf("while setting masterauth on %s: %s", addr, redact(err, password))
		}
	}
	if err := c.Do(ctx, "ACL", "SETUSER", "default", "on", "resetpass", ">"+password).Err(); err != nil {
		return fmt.Errorf("while removing the old passwords on %s (ACL SETUSER default): %s", addr, redact(err, password))
	}
	return nil
}

// Accepts reports whether the node at addr accepts password: a new connection's AUTH
// succeeds. An error means the node could not be asked.
func Accepts(ctx context.Context, addr string, tlsConfig *tls.Config, password string) (bool, error) {
	c, err := dialAuthenticated(ctx, addr, tlsConfig, "", []string{password})
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

// dialRotating opens the connection a rotation step runs on: as admin when set, else as the
// default user with the first of passwords the node accepts.
func dialRotating(ctx context.Context, addr string, tlsConfig *tls.Config, admin *Login, passwords []string) (*goredis.Client, error) {
	if admin != nil {
		return dialAuthenticated(ctx, addr, tlsConfig, admin.User, []string{admin.Password})
	}
	return dialAuthenticated(ctx, addr, tlsConfig, "", passwords)
}

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
