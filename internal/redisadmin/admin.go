package redisadmin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultPollInterval is how often Admin polls nodes while waiting for the cluster to settle.
const DefaultPollInterval = 100 * time.Millisecond

// DefaultWaitTimeout bounds Create when its context has no deadline.
const DefaultWaitTimeout = 2 * time.Minute

// Admin administers Redis Cluster nodes over the Redis protocol. It opens one plain
// (non-cluster) client per node address and keeps it until Close. It is safe for
// concurrent use.
type Admin struct {
	login        Login       // User "" for the default user
	tls          *tls.Config // nil: plain text
	dialTimeout  time.Duration
	pollInterval time.Duration

	mu      sync.Mutex
	clients map[string]*goredis.Client
	dials   atomic.Int64 // connections opened to nodes, slot moves' included
}

// NewAdmin returns an Admin that authenticates with password (none when empty) and gives
// up connecting to a node after dialTimeout.
func NewAdmin(password string, dialTimeout time.Duration) *Admin {
	return &Admin{
		login:        Login{Password: password},
		dialTimeout:  dialTimeout,
		pollInterval: DefaultPollInterval,
		clients:      map[string]*goredis.Client{},
	}
}

// WithUser makes the Admin authenticate as user (an ACL user; "" for the default user) with
// its password. Call it before the first command. MIGRATE then authenticates to the target
// as the same user (AUTH2).
func (a *Admin) WithUser(user string) *Admin {
	a.login.User = user
	return a
}

// WithTLS makes the Admin speak TLS with cfg (nil: plain text) to every node. Call it before
// the first command. MIGRATE between nodes then runs over TLS too, by the nodes themselves,
// when they run with tls-cluster yes.
func (a *Admin) WithTLS(cfg *tls.Config) *Admin {
	a.tls = cfg
	return a
}

// Close closes every client the Admin opened.
func (a *Admin) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for addr, c := range a.clients {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("while closing the client of %s: %w", addr, err))
		}
		delete(a.clients, addr)
	}
	return errors.Join(errs...)
}

// client returns the cached client of addr, opening it on first use.
func (a *Admin) client(addr string) *goredis.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[addr]; ok {
		return c
	}
	c := goredis.NewClient(a.counted(nodeOptions(addr, a.login, a.tls, a.dialTimeout, 2)))
	a.clients[addr] = c
	return c
}

// Connections is how many connections the Admin has opened to nodes since it was made: a
// converged cluster costs none, the clients being kept from one look to the next.
func (a *Admin) Connections() int64 { return a.dials.Load() }

// counted makes every connection opts opens count in Connections.
func (a *Admin) counted(opts *goredis.Options) *goredis.Options {
	opts.OnConnect = func(context.Context, *goredis.Conn) error {
		a.dials.Add(1)
		return nil
	}
	return opts
}

// nodeOptions are the options of every client the operator opens to one node: one dial
// without back-off when the node is down (callers poll again anyway), the caller's context
// deadlines honoured, and no command ever resent (admin commands such as ADDSLOTSRANGE and
// MEET are not idempotent); RESP2, no CLIENT SETINFO, no maintenance notifications. With
// tlsConfig (not nil) the connection is TLS.
func nodeOptions(addr string, login Login, tlsConfig *tls.Config, dialTimeout time.Duration, poolSize int) *goredis.Options {
	if tlsConfig != nil {
		tlsConfig = tlsConfig.Clone()
	}
	return &goredis.Options{
		Addr:                  addr,
		Username:              login.User,
		Password:              login.Password,
		TLSConfig:             tlsConfig,
		DialTimeout:           dialTimeout,
		DialerRetries:         1,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              poolSize,
		// The operator's commands and replies are small (CLUSTER NODES and INFO, a few kB;
		// MIGRATE's arguments): small buffers on one pool keep the connections of an idle
		// cluster cheap. go-redis's defaults give each connection 32 KiB each way and every
		// pipeline a second pool of 128 KiB buffers each way: about 1.9 MiB per idle
		// cluster of six nodes, most of what the operator held per cluster (issue 53).
		ReadBufferSize:           nodeReadBuffer,
		WriteBufferSize:          nodeWriteBuffer,
		PipelinePoolSize:         -1,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// The buffers of a connection to a node (nodeOptions): a reply longer than the read buffer
// is read in several turns, never refused.
const (
	nodeReadBuffer  = 8 << 10
	nodeWriteBuffer = 4 << 10
)

// ClusterNodes returns the cluster as the node at addr sees it.
func (a *Admin) ClusterNodes(ctx context.Context, addr string) ([]Node, error) {
	text, err := a.client(addr).ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("while running CLUSTER NODES on %s: %w", addr, err)
	}
	nodes, err := nodes.ParseClusterNodes(text)
	if err != nil {
		return nil, fmt.Errorf("while reading CLUSTER NODES of %s: %w", addr, err)
	}
	return nodes, nil
}

// ClusterInfo returns the fields of CLUSTER INFO of the node at addr.
func (a *Admin) ClusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	text, err := a.client(addr).ClusterInfo(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("while running CLUSTER INFO on %s: %w", addr, err)
	}
	return ParseClusterInfo(text), nil
}

// myself returns the node at addr as it describes itself, with the rest of its view.
func (a *Admin) myself(ctx context.Context, addr string) (Node, []Node, error) {
	nodes, err := a.ClusterNodes(ctx, addr)
	if err != nil {
		return Node{}, nil, err
	}
	for _, n := range nodes {
		if n.Myself {
			return n, nodes, nil
		}
	}
	return Node{}, nil, fmt.Errorf("while reading CLUSTER NODES of %s: no line is flagged myself", addr)
}

// poll calls cond every pollInterval until it reports done or ctx ends. cond returns why
// it is not done yet; the last reason is part of the error when ctx ends.
func (a *Admin) poll(ctx context.Context, what string, cond func(ctx context.Context) (done bool, reason string)) error {
	ticker := time.NewTicker(a.pollInterval)
	defer ticker.Stop()
	for {
		done, reason := cond(ctx)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("while waiting for %s (last seen: %s): %w", what, reason, ctx.Err())
		case <-ticker.C:
		}
	}
}
