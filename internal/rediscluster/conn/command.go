package conn

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
)

// Command is one Redis command for the node at Addr.
type Command struct {
	Addr string
	Args []string
}

// String is the command as redis-cli would print it, after the node's address.
func (c Command) String() string { return c.Addr + ": " + strings.Join(c.Args, " ") }

// ConfigSet sends one CONFIG SET of the parameter-value pairs to the node at addr; what
// names them in the error.
func ConfigSet(ctx context.Context, addr string, tlsConfig *tls.Config, login Login, what string, pairs ...string) error {
	c, err := Dial(ctx, addr, tlsConfig, login.User, []string{login.Password})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	args := []any{"CONFIG", "SET"}
	for _, p := range pairs {
		args = append(args, p)
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("while setting %s of %s: %w", what, addr, err)
	}
	return nil
}

// ResolveIP returns host if it is an IP, else its first address.
func ResolveIP(ctx context.Context, host string) (string, error) {
	if net.ParseIP(host) != nil {
		return host, nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", fmt.Errorf("while resolving %s for CLUSTER MEET: %w", host, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("while resolving %s for CLUSTER MEET: no address", host)
	}
	return addrs[0].IP.String(), nil
}
