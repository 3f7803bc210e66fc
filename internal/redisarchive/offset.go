package redisarchive

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// ReplicationOffset reads the node's master_repl_offset (INFO replication): on a master,
// the offset of the last write it propagated, so every write it acknowledged before is at
// or below it; on a replica, how far it has processed its master's stream. A new
// timeline's follower that has received up to it has caught up with every write
// acknowledged before the call.
func ReplicationOffset(ctx context.Context, opts rdbstream.Options) (int64, error) {
	conn, err := rdbstream.Dial(ctx, opts)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	timeout := opts.DialTimeout
	if timeout <= 0 {
		timeout = rdbstream.DefaultDialTimeout
	}
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(rdbstream.Encode("INFO", "replication")); err != nil {
		return 0, fmt.Errorf("while asking %s for INFO replication: %w", opts.Addr, err)
	}
	r := bufio.NewReader(conn)
	line, err := readLine(r)
	if err != nil {
		return 0, fmt.Errorf("while reading INFO replication from %s: %w", opts.Addr, err)
	}
	if len(line) == 0 || line[0] != '$' {
		return 0, fmt.Errorf("INFO replication from %s: %q", opts.Addr, clip(line))
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("%w: INFO replication from %s: %q", ErrProtocol, opts.Addr, clip(line))
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, fmt.Errorf("while reading INFO replication from %s: %w", opts.Addr, noEOF(err))
	}
	for l := range strings.SplitSeq(string(body[:n]), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "master_repl_offset:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO replication from %s has no master_repl_offset", opts.Addr)
}
