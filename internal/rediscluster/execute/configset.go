package execute

import (
	"context"
	"crypto/tls"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// SetAnnounce makes the node at addr announce hostname to clients, with
// cluster-preferred-endpoint-type endpoint (plan.EndpointHostname or plan.EndpointIP), in
// one CONFIG SET.
func SetAnnounce(ctx context.Context, addr string, tlsConfig *tls.Config, login conn.Login, hostname, endpoint string) error {
	return conn.ConfigSet(ctx, addr, tlsConfig, login, "the announced hostname",
		"cluster-announce-hostname", hostname, "cluster-preferred-endpoint-type", endpoint)
}

// SetCoverage sets cluster-require-full-coverage to value (yes or no) on the node at addr.
func SetCoverage(ctx context.Context, addr string, tlsConfig *tls.Config, login conn.Login, value string) error {
	return conn.ConfigSet(ctx, addr, tlsConfig, login, "cluster-require-full-coverage", "cluster-require-full-coverage", value)
}

// SetMemory sets m on the node at addr with one CONFIG SET (maxmemory and
// maxmemory-policy together).
func SetMemory(ctx context.Context, addr string, tlsConfig *tls.Config, login conn.Login, m plan.Memory) error {
	args := []string{"maxmemory-policy", m.Policy}
	if !m.KeepMaxMemory {
		args = append(args, "maxmemory", strconv.FormatInt(m.MaxMemory, 10))
	}
	return conn.ConfigSet(ctx, addr, tlsConfig, login, "the memory configuration", args...)
}

// SetWriteSafety sets w on the node at addr with one CONFIG SET.
func SetWriteSafety(ctx context.Context, addr string, tlsConfig *tls.Config, login conn.Login, w plan.WriteSafety) error {
	return conn.ConfigSet(ctx, addr, tlsConfig, login, "min-replicas-to-write",
		"min-replicas-max-lag", strconv.Itoa(w.MaxLag), "min-replicas-to-write", strconv.Itoa(w.MinReplicas))
}
