package redistest

import (
	"context"
	"net"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// Dial opens a connection as goredis.Options.Dialer does.
type Dial func(ctx context.Context, network, addr string) (net.Conn, error)

// StartDialingWriter is StartWriter with a client whose seeds are addrs and which opens
// every connection with dial: a client that can reach only some addresses (outside the
// Kubernetes cluster, say) fails rather than falls back to others.
func StartDialingWriter(addrs []string, password string, dial Dial) *Writer {
	return startWriter(DialingClient(addrs, password, dial), nil)
}

// DialingClient is the cluster client of StartDialingWriter.
func DialingClient(addrs []string, password string, dial Dial) *goredis.ClusterClient {
	return testClient(addrs[0], password, nil, func(o *goredis.ClusterOptions) { o.Addrs, o.Dialer = addrs, dial })
}

// Keys are the keys the writer was told were written so far.
func (w *Writer) Keys() []string {
	keys := make([]string, w.Written())
	for n := range keys {
		keys[n] = "w:" + strconv.Itoa(n)
	}
	return keys
}
