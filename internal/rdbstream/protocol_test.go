package rdbstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeNode is one connection's worth of a scripted Redis node.
type fakeNode struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

// readCommand reads one RESP array of bulk strings.
func (n *fakeNode) readCommand() []string {
	line, err := n.r.ReadString('\n')
	if err != nil {
		return nil
	}
	count, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	args := make([]string, count)
	for i := range args {
		if _, err := n.r.ReadString('\n'); err != nil { // $<len>
			return nil
		}
		arg, _ := n.r.ReadString('\n')
		args[i] = strings.TrimRight(arg, "\r\n")
	}
	return args
}

// expect reads a command and answers it with reply.
func (n *fakeNode) expect(want, reply string) {
	if got := strings.Join(n.readCommand(), " "); got != want {
		n.t.Errorf("the node got %q, want %q", got, want)
	}
	n.send(reply)
}

// send writes s; a client that has gone is the test's business, not the node's.
func (n *fakeNode) send(s string) { _ = n.write(s) }

func (n *fakeNode) write(s string) error {
	_, err := n.conn.Write([]byte(s))
	return err
}

// handshake plays the node's side up to PSYNC, without AUTH.
func (n *fakeNode) handshake() {
	n.expect("REPLCONF capa eof", "+OK\r\n")
	n.expect("REPLCONF rdb-only 1", "+OK\r\n")
	if got := strings.Join(n.readCommand(), " "); got != "PSYNC ? -1" {
		n.t.Errorf("the node got %q, want PSYNC ? -1", got)
	}
}

// serve starts a node that runs script on its first connection, and returns its address.
func serve(t *testing.T, script func(n *fakeNode)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = l.Close(); <-done })
	go func() {
		defer close(done)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		script(&fakeNode{t: t, conn: conn, r: bufio.NewReader(conn)})
	}()
	return l.Addr().String()
}

const replID = "8f2b5d4c1a7e9f0b3c6d2e8a4f1b7c9d0e3a5b6c"

func TestFetchProtocol(t *testing.T) {
	// Aux fields redis-ver and ctime (an int32: 1,700,000,000), database 0 with one key of
	// which none has a TTL, then the key.
	rdb := rdbOf([]byte("\xfa\x09redis-ver\x067.0.15\xfa\x05ctime\xc2\x00\xf1\x53\x65"+
		"\xfe\x00\xfb\x01\x00\x00\x05hello\x05world"), false)
	mark := strings.Repeat("m", eofMarkLen)
	disk := "+FULLRESYNC " + replID + " 1234\r\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	cases := map[string]struct {
		opts   Options
		script func(n *fakeNode)
		want   Result
		err    error
		errMsg string
	}{
		"from disk": {
			script: func(n *fakeNode) { n.handshake(); n.send(disk) },
			want:   Result{ReplID: replID, Offset: 1234, RDBVersion: 10, Checksummed: true},
		},
		"keepalive newlines while the node forks": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("\n\n")
				n.send("+FULLRESYNC " + replID + " 7\r\n")
				n.send("\n\n\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb))
			},
			want: Result{ReplID: replID, Offset: 7, RDBVersion: 10, Checksummed: true},
		},
		"diskless, the mark in its own packet": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("+FULLRESYNC " + replID + " 0\r\n$EOF:" + mark + "\r\n" + string(rdb))
				time.Sleep(20 * time.Millisecond)
				n.send(mark)
			},
			want: Result{ReplID: replID, RDBVersion: 10, Diskless: true, Checksummed: true},
		},
		"diskless, the mark with the data": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("+FULLRESYNC " + replID + " 0\r\n$EOF:" + mark + "\r\n" + string(rdb) + mark)
			},
			want: Result{ReplID: replID, RDBVersion: 10, Diskless: true, Checksummed: true},
		},
		"AUTH with a user": {
			opts: Options{Username: "backup", Password: "s3cret"},
			script: func(n *fakeNode) {
				n.expect("AUTH backup s3cret", "+OK\r\n")
				n.handshake()
				n.send(disk)
			},
			want: Result{ReplID: replID, Offset: 1234, RDBVersion: 10, Checksummed: true},
		},
		"a node before Redis 7 without rdb-only": {
			script: func(n *fakeNode) {
				n.expect("REPLCONF capa eof", "+OK\r\n")
				n.expect("REPLCONF rdb-only 1", "-ERR Unrecognized REPLCONF option: rdb-only\r\n")
				_ = n.readCommand()
				n.send(disk + "*1\r\n$4\r\nPING\r\n") // the command stream follows
			},
			want: Result{ReplID: replID, Offset: 1234, RDBVersion: 10, Checksummed: true},
		},
		"wrong password": {
			opts: Options{Password: "nope"},
			script: func(n *fakeNode) {
				n.expect("AUTH nope", "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
			},
			err: ErrAuth, errMsg: "WRONGPASS",
		},
		"no password given": {
			script: func(n *fakeNode) { n.expect("REPLCONF capa eof", "-NOAUTH Authentication required.\r\n") },
			err:    ErrAuth, errMsg: "NOAUTH",
		},
		"a user without PSYNC": {
			opts: Options{Username: "app", Password: "pw"},
			script: func(n *fakeNode) {
				n.expect("AUTH app pw", "+OK\r\n")
				n.expect("REPLCONF capa eof", "-NOPERM this user has no permissions to run the 'replconf' command\r\n")
			},
			err: ErrAuth, errMsg: "NOPERM",
		},
		"a replica without its master": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("-NOMASTERLINK Can't SYNC while not connected with my master\r\n")
			},
			err: ErrRefused, errMsg: "NOMASTERLINK",
		},
		"a partial resync answer": {
			script: func(n *fakeNode) { n.handshake(); n.send("+CONTINUE " + replID + "\r\n") },
			err:    ErrProtocol, errMsg: "+FULLRESYNC",
		},
		"not an RDB": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("+FULLRESYNC " + replID + " 1\r\n$20\r\nnot an rdb at all...")
			},
			err: ErrInvalid, errMsg: "not REDIS",
		},
		"the connection ends mid-payload": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("+FULLRESYNC " + replID + " 1\r\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb[:20]))
			},
			err: ErrInvalid, errMsg: "ended after 20",
		},
		"diskless, cut before the mark": {
			script: func(n *fakeNode) {
				n.handshake()
				n.send("+FULLRESYNC " + replID + " 0\r\n$EOF:" + mark + "\r\n" + string(rdb[:len(rdb)-3]))
			},
			err: ErrInvalid, errMsg: "before the end mark",
		},
		"a corrupted payload": {
			script: func(n *fakeNode) {
				bad := bytes.Clone(rdb)
				bad[12] ^= 0x40
				n.handshake()
				n.send("+FULLRESYNC " + replID + " 1\r\n$" + strconv.Itoa(len(bad)) + "\r\n" + string(bad))
			},
			err: ErrInvalid, errMsg: "CRC-64",
		},
		"a bad mark": {
			script: func(n *fakeNode) { n.handshake(); n.send("+FULLRESYNC " + replID + " 0\r\n$EOF:short\r\n") },
			err:    ErrProtocol, errMsg: "EOF mark of 5 bytes",
		},
		"silence": {
			opts:   Options{IdleTimeout: 300 * time.Millisecond},
			script: func(n *fakeNode) { n.handshake(); time.Sleep(time.Second) },
			errMsg: "nothing received for 300ms",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := tc.opts
			opts.Addr = serve(t, tc.script)
			var out bytes.Buffer
			got, err := Fetch(t.Context(), opts, &out)
			if tc.err != nil || tc.errMsg != "" {
				if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("error %v, want %v with %q", err, tc.err, tc.errMsg)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Bytes, tc.want.SHA256 = int64(len(rdb)), newCheckerSum(rdb)
			tc.want.Keys, tc.want.RedisVersion, tc.want.Created = 1, "7.0.15", time.Unix(1_700_000_000, 0).UTC()
			if got != tc.want || !bytes.Equal(out.Bytes(), rdb) {
				t.Fatalf("got %+v and %d bytes, want %+v and the %d of the RDB", got, out.Len(), tc.want, len(rdb))
			}
		})
	}
}

func newCheckerSum(b []byte) string {
	c := newChecker(io.Discard)
	_, _ = c.Write(b)
	return c.sum()
}

// TestFetchCancel checks that cancelling the context stops a transfer at once, even one
// that is receiving data.
func TestFetchCancel(t *testing.T) {
	addr := serve(t, func(n *fakeNode) {
		n.handshake()
		n.send("+FULLRESYNC " + replID + " 0\r\n$EOF:" + strings.Repeat("m", eofMarkLen) + "\r\nREDIS0010")
		for range 100 { // a slow node: a trickle of bytes for 10 s, until the client leaves
			if n.write(strings.Repeat("x", 100)) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Fetch(ctx, Options{Addr: addr}, io.Discard)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Fetch returned %s after the deadline", took)
	}
}

func TestEncode(t *testing.T) {
	if got := string(Encode("AUTH", "user", "pa ss")); got != "*3\r\n$4\r\nAUTH\r\n$4\r\nuser\r\n$5\r\npa ss\r\n" {
		t.Fatalf("encode = %q", got)
	}
}
