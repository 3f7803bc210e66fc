package conn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// clusterInfoCommand is CLUSTER INFO in the Redis protocol.
var clusterInfoCommand = rdbstream.Encode("CLUSTER", "INFO")

// maxClusterInfo bounds a CLUSTER INFO reply (about 700 bytes from Redis 7.0), and
// maxErrorReply the part of an error reply an error carries.
const (
	maxClusterInfo = 64 << 10
	maxErrorReply  = 256
)

// infoConn is a kept connection that only ever sends CLUSTER INFO, with the buffer its
// replies are read into; kept: it served an earlier call (the node may have closed it).
type infoConn struct {
	c    net.Conn
	buf  []byte
	kept bool
}

// lateGrace is how long a node's reply is still waited for once the call's deadline has
// passed while other nodes were read: it was sent with the others, so it is there or late.
const lateGrace = 50 * time.Millisecond

// ClusterInfos sends CLUSTER INFO to every node at addrs, then reads the replies in turn,
// over connections kept for it alone (plain net.Conns authenticated as the Pool's login,
// with its TLS), and calls each(i, reply) with each node's reply, or returns why the node
// did not answer in errs[i]. The reply is valid only during the call. It is the cheap read
// of a quiet look, made every 2.5 s on every idle cluster: no client library, no goroutine
// and no allocation per node once the connections are open, and the replies mostly read
// without waiting, all commands being sent first. A connection that fails is closed and
// dialled again next time; a kept one the node closed (it restarted) is dialled again at
// once, once; connections are dialled side by side. ctx's deadline (else the Pool's dial
// timeout) bounds the answers; a reply read after it, behind a silent node, gets lateGrace.
func (p *Pool) ClusterInfos(ctx context.Context, addrs []string, each func(i int, reply []byte)) (errs []error) {
	errs = make([]error, len(addrs))
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.dialTimeout)
	}
	conns := make([]*infoConn, len(addrs))
	var dials sync.WaitGroup
	for i, addr := range addrs {
		if c := p.takeInfoConn(addr); c != nil {
			if err := c.send(deadline); err == nil {
				conns[i] = c
				continue
			}
			_ = c.c.Close()
		}
		dials.Go(func() { conns[i], errs[i] = p.dialInfo(ctx, addr, deadline) })
	}
	dials.Wait()
	for i, addr := range addrs {
		c := conns[i]
		if c == nil {
			continue
		}
		if !time.Now().Before(deadline) {
			_ = c.c.SetDeadline(time.Now().Add(lateGrace))
		}
		reply, err := c.receive()
		if err != nil && c.kept && !timedOut(err) {
			// The node closed a kept connection (it restarted): ask again on a new one.
			_ = c.c.Close()
			if c, err = p.dialInfo(ctx, addr, time.Now().Add(p.dialTimeout)); err == nil {
				reply, err = c.receive()
			}
		}
		if err != nil {
			if c != nil {
				_ = c.c.Close()
			}
			errs[i] = err
			continue
		}
		each(i, reply)
		p.keepInfoConn(addr, c)
	}
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("while reading the cluster state of %s: %w", addrs[i], err)
		}
	}
	return errs
}

// dialInfo opens a connection for CLUSTER INFO and sends the command, by deadline.
func (p *Pool) dialInfo(ctx context.Context, addr string, deadline time.Time) (*infoConn, error) {
	p.dials.Add(1)
	c, err := rdbstream.Dial(ctx, rdbstream.Options{Addr: addr, Username: p.login.User, Password: p.login.Password,
		TLS: p.tls, DialTimeout: p.dialTimeout})
	if err != nil {
		return nil, err
	}
	ic := &infoConn{c: c}
	if err := ic.send(deadline); err != nil {
		_ = c.Close()
		return nil, err
	}
	return ic, nil
}

// send writes CLUSTER INFO, with deadline for it and its reply.
func (ic *infoConn) send(deadline time.Time) error {
	if err := ic.c.SetDeadline(deadline); err != nil {
		return err
	}
	_, err := ic.c.Write(clusterInfoCommand)
	return err
}

// receive reads one CLUSTER INFO reply, a bulk string, into the connection's buffer.
func (ic *infoConn) receive() ([]byte, error) {
	if ic.buf == nil {
		ic.buf = make([]byte, 0, 1024)
	}
	buf := ic.buf[:0]
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxClusterInfo {
				return nil, errors.New("a CLUSTER INFO reply longer than 64 KiB")
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := ic.c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		reply, complete, perr := bulkString(buf)
		if perr != nil {
			return nil, perr
		}
		if complete {
			ic.buf = buf
			return reply, nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// bulkString parses a bulk string reply at the start of buf: the string, whether buf
// holds all of it, or the node's error reply (or a protocol error).
func bulkString(buf []byte) (reply []byte, complete bool, err error) {
	line := bytes.Index(buf, []byte("\r\n"))
	if line < 0 {
		return nil, false, nil
	}
	switch {
	case buf[0] == '-':
		// The node's own words, at most maxErrorReply bytes of them.
		return nil, false, errors.New(string(buf[1:min(line, 1+maxErrorReply)]))
	case buf[0] != '$':
		return nil, false, fmt.Errorf("%w: %q", rdbstream.ErrProtocol, buf[:line])
	}
	n, err := strconv.Atoi(string(buf[1:line]))
	if err != nil || n < 0 || n > maxClusterInfo {
		return nil, false, fmt.Errorf("%w: %q", rdbstream.ErrProtocol, buf[:line])
	}
	start := line + 2
	if len(buf) < start+n+2 {
		return nil, false, nil
	}
	return buf[start : start+n], true, nil
}

// timedOut reports whether err is a read that waited out its deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// takeInfoConn takes the kept CLUSTER INFO connection of addr out of the Pool (nil when
// there is none): it is used by one caller at a time.
func (p *Pool) takeInfoConn(addr string) *infoConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.infoConns[addr]
	delete(p.infoConns, addr)
	if c != nil {
		c.kept = true
	}
	return c
}

// keepInfoConn puts c back as addr's CLUSTER INFO connection, closing it when another
// caller kept one meanwhile or the Pool is closed.
func (p *Pool) keepInfoConn(addr string, c *infoConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.infoConns[addr]; ok || p.closed {
		_ = c.c.Close()
		return
	}
	if p.infoConns == nil {
		p.infoConns = map[string]*infoConn{}
	}
	p.infoConns[addr] = c
}
