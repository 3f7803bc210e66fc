package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Login is a Redis user and its password; User "" is the default user.
type Login struct {
	User, Password string
}

// Accepts reports whether the node at addr accepts login: a new connection's AUTH
// succeeds. An error means the node could not be asked.
func Accepts(ctx context.Context, addr string, tlsConfig *tls.Config, login Login) (bool, error) {
	c, err := Dial(ctx, addr, tlsConfig, login.User, []string{login.Password})
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

// Dial opens a connection to addr authenticated as user ("" for the default user) with the
// first of passwords the node accepts.
func Dial(ctx context.Context, addr string, tlsConfig *tls.Config, user string, passwords []string) (*goredis.Client, error) {
	var last error
	for _, pw := range passwords {
		if pw == "" {
			continue
		}
		opts := NodeOptions(addr, Login{user, pw}, tlsConfig, 2*time.Second, 1)
		opts.ReadTimeout, opts.WriteTimeout = 5*time.Second, 5*time.Second
		c := goredis.NewClient(opts)
		err := c.Ping(ctx).Err()
		if err == nil {
			return c, nil
		}
		_ = c.Close()
		if !IsAuthError(err) {
			return nil, fmt.Errorf("while connecting to %s: %s", addr, Redact(err, pw))
		}
		last = err
	}
	if last == nil {
		return nil, fmt.Errorf("while connecting to %s: no password to offer", addr)
	}
	return nil, fmt.Errorf("%s: %w", addr, ErrWrongPassword)
}

// Redact returns err's text with secret replaced, so no error can carry a password.
func Redact(err error, secret string) string {
	if secret == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), secret, "<password>")
}

// IsAuthError reports whether err is Redis refusing the password (WRONGPASS, NOAUTH, or an
// old server's "invalid password").
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "invalid password") ||
		strings.Contains(msg, "invalid username-password")
}
