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

// maxClusterInfo bounds a CLUSTER INFO reply (about 700 bytes from Redis 7.0).
const maxClusterInfo = 64 << 10

// infoConn is a kept connection that only ever sends CLUSTER INFO, with the buffer its
// replies are read into.
type infoConn struct {
	c   net.Conn
	buf []byte
}

// ClusterInfos sends CLUSTER INFO to every node at addrs at once, over connections kept for
// it alone (plain net.Conns authenticated as the Pool's login, with its TLS), and calls
// each(i, reply) with each node's reply, or returns why the node did not answer in errs[i].
// The reply is valid only during the call; calls of each may come at once. It is the cheap
// read of a quiet look, made every 2.5 s on every idle cluster: no client library, no
// allocation per reply once the connections are open. A connection that fails is closed and
// dialled again next time; a kept one the node closed (it restarted) is dialled again at
// once, once. ctx's deadline (else the Pool's dial timeout) bounds each node's answer.
func (p *Pool) ClusterInfos(ctx context.Context, addrs []string, each func(i int, reply []byte)) (errs []error) {
	errs = make([]error, len(addrs))
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.dialTimeout)
	}
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			if err := p.clusterInfo(ctx, addr, deadline, func(reply []byte) { each(i, reply) }); err != nil {
				errs[i] = fmt.Errorf("while reading the cluster state of %s: %w", addr, err)
			}
		})
	}
	wg.Wait()
	return errs
}

// clusterInfo asks the node at addr CLUSTER INFO (see ClusterInfos).
func (p *Pool) clusterInfo(ctx context.Context, addr string, deadline time.Time, each func(reply []byte)) error {
	c := p.takeInfoConn(addr)
	kept := c != nil
	if !kept {
		var err error
		if c, err = p.dialInfo(ctx, addr); err != nil {
			return err
		}
	}
	reply, err := c.ask(deadline)
	if err != nil && kept && !timedOut(err) {
		// The node closed a kept connection (it restarted): ask again on a new one.
		_ = c.c.Close()
		if c, err = p.dialInfo(ctx, addr); err != nil {
			return err
		}
		reply, err = c.ask(deadline)
	}
	if err != nil {
		_ = c.c.Close()
		return err
	}
	each(reply)
	p.keepInfoConn(addr, c)
	return nil
}

// dialInfo opens a connection for CLUSTER INFO.
func (p *Pool) dialInfo(ctx context.Context, addr string) (*infoConn, error) {
	p.dials.Add(1)
	c, err := rdbstream.Dial(ctx, rdbstream.Options{Addr: addr, Username: p.login.User, Password: p.login.Password,
		TLS: p.tls, DialTimeout: p.dialTimeout})
	if err != nil {
		return nil, err
	}
	return &infoConn{c: c}, nil
}

// ask writes CLUSTER INFO and reads its reply, both by deadline.
func (ic *infoConn) ask(deadline time.Time) ([]byte, error) {
	if err := ic.c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := ic.c.Write(clusterInfoCommand); err != nil {
		return nil, err
	}
	return ic.receive()
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
		return nil, false, errors.New(string(buf[1:line]))
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
