package conn

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

// defaultPollInterval is how often a Pool polls nodes while waiting for the cluster to settle.
const defaultPollInterval = 100 * time.Millisecond

// Pool holds the connections to a cluster's nodes over the Redis protocol. It opens one
// plain (non-cluster) client per node address and keeps it until Close. It is safe for
// concurrent use.
type Pool struct {
	login        Login       // User "" for the default user
	tls          *tls.Config // nil: plain text
	dialTimeout  time.Duration
	pollInterval time.Duration

	mu      sync.Mutex
	clients map[string]*goredis.Client
	// infoConns are the connections of ClusterInfos, by address; closed: Close was called.
	infoConns map[string]*infoConn
	closed    bool
	dials     atomic.Int64 // connections opened to nodes, slot moves' included
}

// NewPool returns a Pool that authenticates with password (none when empty) and gives
// up connecting to a node after dialTimeout.
func NewPool(password string, dialTimeout time.Duration) *Pool {
	return &Pool{
		login:        Login{Password: password},
		dialTimeout:  dialTimeout,
		pollInterval: defaultPollInterval,
		clients:      map[string]*goredis.Client{},
	}
}

// WithUser makes the Pool authenticate as user (an ACL user; "" for the default user) with
// its password. Call it before the first command. MIGRATE then authenticates to the target
// as the same user (AUTH2).
func (p *Pool) WithUser(user string) *Pool {
	p.login.User = user
	return p
}

// WithTLS makes the Pool speak TLS with cfg (nil: plain text) to every node. Call it before
// the first command. MIGRATE between nodes then runs over TLS too, by the nodes themselves,
// when they run with tls-cluster yes.
func (p *Pool) WithTLS(cfg *tls.Config) *Pool {
	p.tls = cfg
	return p
}

// Close closes every client the Pool opened.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	p.closed = true
	for addr, c := range p.infoConns {
		_ = c.c.Close()
		delete(p.infoConns, addr)
	}
	for addr, c := range p.clients {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("while closing the client of %s: %w", addr, err))
		}
		delete(p.clients, addr)
	}
	return errors.Join(errs...)
}

// Client returns the cached client of addr, opening it on first use.
func (p *Pool) Client(addr string) *goredis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[addr]; ok {
		return c
	}
	c := goredis.NewClient(p.Options(addr, 2))
	p.clients[addr] = c
	return c
}

// Connections is how many connections the Pool has opened to nodes since it was made: a
// converged cluster costs none, the clients being kept from one look to the next.
func (p *Pool) Connections() int64 { return p.dials.Load() }

// Options are the options of a client of the node at addr with poolSize connections, as
// the Pool's own are made (its login, TLS and dial timeout): every connection it opens
// counts in Connections. Slot moves open their own clients with them.
func (p *Pool) Options(addr string, poolSize int) *goredis.Options {
	return p.counted(NodeOptions(addr, p.login, p.tls, p.dialTimeout, poolSize))
}

// Login is the user and password the Pool authenticates with (MIGRATE passes them on to
// the target node).
func (p *Pool) Login() Login { return p.login }

// counted makes every connection opts opens count in Connections.
func (p *Pool) counted(opts *goredis.Options) *goredis.Options {
	opts.OnConnect = func(context.Context, *goredis.Conn) error {
		p.dials.Add(1)
		return nil
	}
	return opts
}

// NodeOptions are the options of every client the operator opens to one node: one dial
// without back-off when the node is down (callers poll again anyway), the caller's context
// deadlines honoured, and no command ever resent (admin commands such as ADDSLOTSRANGE and
// MEET are not idempotent); RESP2, no CLIENT SETINFO, no maintenance notifications. With
// tlsConfig (not nil) the connection is TLS.
func NodeOptions(addr string, login Login, tlsConfig *tls.Config, dialTimeout time.Duration, poolSize int) *goredis.Options {
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

// The buffers of a connection to a node (NodeOptions): a reply longer than the read buffer
// is read in several turns, never refused.
const (
	nodeReadBuffer  = 8 << 10
	nodeWriteBuffer = 4 << 10
)

// ClusterNodes returns the cluster as the node at addr sees it.
func (p *Pool) ClusterNodes(ctx context.Context, addr string) ([]nodes.Node, error) {
	text, err := p.Client(addr).ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("while running CLUSTER NODES on %s: %w", addr, err)
	}
	view, err := nodes.ParseClusterNodes(text)
	if err != nil {
		return nil, fmt.Errorf("while reading CLUSTER NODES of %s: %w", addr, err)
	}
	return view, nil
}

// ClusterInfo returns the fields of CLUSTER INFO of the node at addr.
func (p *Pool) ClusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	text, err := p.Client(addr).ClusterInfo(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("while running CLUSTER INFO on %s: %w", addr, err)
	}
	return nodes.ParseClusterInfo(text), nil
}

// Myself returns the node at addr as it describes itself, with the rest of its view.
func (p *Pool) Myself(ctx context.Context, addr string) (nodes.Node, []nodes.Node, error) {
	view, err := p.ClusterNodes(ctx, addr)
	if err != nil {
		return nodes.Node{}, nil, err
	}
	for _, n := range view {
		if n.Myself {
			return n, view, nil
		}
	}
	return nodes.Node{}, nil, fmt.Errorf("while reading CLUSTER NODES of %s: no line is flagged myself", addr)
}

// Poll calls cond every pollInterval until it reports done or ctx ends. cond returns why
// it is not done yet; the last reason is part of the error when ctx ends.
func (p *Pool) Poll(ctx context.Context, what string, cond func(ctx context.Context) (done bool, reason string)) error {
	ticker := time.NewTicker(p.pollInterval)
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
