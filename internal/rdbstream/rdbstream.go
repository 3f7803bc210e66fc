package rdbstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = time.Minute
)

// eofMarkLen is the length of the mark that ends a diskless payload.
const eofMarkLen = 40

// Options says which node to ask and how.
type Options struct {
	// Addr is the node's host:port.
	Addr string
	// Username and Password authenticate (AUTH [username] password); no Password, no AUTH.
	Username, Password string
	// TLS, when set, wraps the connection; an empty ServerName is taken from Addr.
	TLS *tls.Config
	// DialTimeout bounds the connection and TLS handshake (default DefaultDialTimeout).
	DialTimeout time.Duration
	// IdleTimeout is the longest silence allowed once connected: while the node prepares the
	// snapshot it sends a newline every second, so silence means a dead node or link
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ViaDisk leaves out REPLCONF capa eof, so the node writes the snapshot to its disk and
	// then sends the file, starting at once, instead of streaming it from its fork after
	// repl-diskless-sync-delay (5 s by default) spent waiting for other replicas that a
	// backup never brings. The node needs free disk for one snapshot (as for BGSAVE) and
	// replaces its dump.rdb with it.
	ViaDisk bool
}

// Result describes a fetched snapshot.
type Result struct {
	// Bytes and SHA256 (lower-case hex) are the RDB's length and digest: what was written.
	Bytes  int64
	SHA256 string
	// RDBVersion is the RDB format version in the header (10 for Redis 7.0, 11 for 7.2, 12
	// for 7.4).
	RDBVersion int
	// ReplID and Offset are the node's replication ID and offset the snapshot corresponds to
	// (+FULLRESYNC): the snapshot holds the writes of that history up to that offset.
	ReplID string
	Offset int64
	// Diskless is true when the node streamed the RDB from its fork ($EOF:<mark> framing),
	// false when it wrote it to disk first ($<length> framing).
	Diskless bool
	// Checksummed is true when the RDB carried a CRC-64 (and it matched); false when the
	// node runs with rdbchecksum no.
	Checksummed bool
	// Keys is the number of keys of database 0 in the snapshot, and Expires how many of them
	// have a TTL, as the node counted them when writing it (keys past their TTL included:
	// they are dropped when a master loads the file); -1 when the RDB does not say (a
	// module's data before the keys, or no database 0). Cluster mode has only database 0.
	Keys, Expires int64
	// RedisVersion is the version of the Redis that wrote the snapshot (its redis-ver field).
	RedisVersion string
	// Created is when the node started writing the snapshot, by its clock (its ctime field,
	// in seconds); zero when the RDB does not say.
	Created time.Time
}

// Errors a caller can act on, matched with errors.Is; the error also carries the node's
// words.
var (
	// ErrAuth: the node refused the credentials, or the user may not PSYNC/REPLCONF.
	ErrAuth = errors.New("authentication or permission refused")
	// ErrRefused: the node refused to sync (for example a replica not linked to its master).
	ErrRefused = errors.New("the node refused to send a snapshot")
	// ErrInvalid: the payload is not a whole RDB (magic, version, end or checksum).
	ErrInvalid = errors.New("invalid RDB")
	// ErrProtocol: the node's answer is not what the replication protocol says.
	ErrProtocol = errors.New("unexpected replication protocol answer")
)

// Fetch asks the node at opts.Addr for a snapshot and writes it to w as it arrives. It
// returns when the whole RDB is written and checked, the context ends, the connection fails
// or stays silent for IdleTimeout, or w fails.
func Fetch(ctx context.Context, opts Options, w io.Writer) (Result, error) {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	conn, err := Dial(ctx, opts)
	if err != nil {
		return Result{}, fmt.Errorf("while fetching the RDB of %s: %w", opts.Addr, err)
	}
	defer func() { _ = conn.Close() }()
	dc := &deadlineConn{conn: conn, idle: opts.IdleTimeout}
	stop := context.AfterFunc(ctx, dc.cancel)
	defer stop()
	s := &session{addr: opts.Addr, r: bufio.NewReaderSize(dc, 64<<10), w: conn, viaDisk: opts.ViaDisk}
	res, err := s.fetch(w)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return res, fmt.Errorf("while fetching the RDB of %s: %w (%w)", opts.Addr, ctxErr, err)
		}
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return res, fmt.Errorf("while fetching the RDB of %s: nothing received for %s: %w", opts.Addr, opts.IdleTimeout, err)
		}
		return res, fmt.Errorf("while fetching the RDB of %s: %w", opts.Addr, err)
	}
	return res, nil
}

// Dial connects to the node at opts.Addr, with TLS when opts.TLS is set, and authenticates
// (AUTH [Username] Password) when opts.Password is set: the connection every exchange with a
// node starts from. DialTimeout (default DefaultDialTimeout) bounds each of the three.
func Dial(ctx context.Context, opts Options) (net.Conn, error) {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	conn, err := dial(ctx, opts)
	if err != nil || opts.Password == "" {
		return conn, err
	}
	args := []string{"AUTH", opts.Password}
	if opts.Username != "" {
		args = []string{"AUTH", opts.Username, opts.Password}
	}
	if err := authenticate(conn, opts.DialTimeout, args); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("AUTH: %w", err)
	}
	return conn, nil
}

// authenticate sends AUTH and reads its one-line answer byte by byte, so that nothing after
// it is read ahead.
func authenticate(conn net.Conn, timeout time.Duration, args []string) error {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := conn.Write(Encode(args...)); err != nil {
		return fmt.Errorf("while sending AUTH: %w", err)
	}
	var line []byte
	var b [1]byte
	for len(line) < 4096 {
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			return fmt.Errorf("while reading the answer to AUTH: %w", err)
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	text := strings.TrimRight(string(line), "\r")
	switch {
	case strings.HasPrefix(text, "+"):
		return conn.SetDeadline(time.Time{})
	case strings.HasPrefix(text, "-"):
		return replyError(text[1:])
	}
	return fmt.Errorf("%w: %q", ErrProtocol, text)
}

// dial connects to the node, with TLS when asked.
func dial(ctx context.Context, opts Options) (net.Conn, error) {
	d := net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("while connecting to %s: %w", opts.Addr, err)
	}
	if opts.TLS == nil {
		return conn, nil
	}
	cfg := opts.TLS.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(opts.Addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	hctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("while the TLS handshake with %s: %w", opts.Addr, err)
	}
	return tc, nil
}

// deadlineConn is a connection whose every read must see data within idle, and that a
// cancel makes fail at once, even a read that has already begun.
type deadlineConn struct {
	conn      net.Conn
	idle      time.Duration
	mu        sync.Mutex
	cancelled bool
}

func (d *deadlineConn) Read(p []byte) (int, error) {
	d.mu.Lock()
	if d.cancelled {
		d.mu.Unlock()
		return 0, errors.New("cancelled")
	}
	err := d.conn.SetReadDeadline(time.Now().Add(d.idle))
	d.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return d.conn.Read(p)
}

func (d *deadlineConn) cancel() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancelled = true
	_ = d.conn.SetDeadline(time.Unix(1, 0))
}

// session is one exchange with a node.
type session struct {
	addr    string
	r       *bufio.Reader
	w       io.Writer
	viaDisk bool // Options.ViaDisk
}

func (s *session) fetch(w io.Writer) (Result, error) {
	if !s.viaDisk {
		if err := s.command("REPLCONF", "capa", "eof"); err != nil {
			return Result{}, fmt.Errorf("REPLCONF capa eof: %w", err)
		}
	}
	// Before Redis 7.0 the node does not know rdb-only: it then streams commands after the
	// snapshot, which Fetch never reads.
	if err := s.command("REPLCONF", "rdb-only", "1"); err != nil && !isUnknownOption(err) {
		return Result{}, fmt.Errorf("REPLCONF rdb-only 1: %w", err)
	}
	if _, err := s.w.Write(Encode("PSYNC", "?", "-1")); err != nil {
		return Result{}, fmt.Errorf("while sending PSYNC: %w", err)
	}
	line, err := s.readLine()
	if err != nil {
		return Result{}, fmt.Errorf("while reading the answer to PSYNC: %w", err)
	}
	var res Result
	if res.ReplID, res.Offset, err = parseFullResync(line); err != nil {
		return res, fmt.Errorf("PSYNC: %w", err)
	}
	if line, err = s.readLine(); err != nil {
		return res, fmt.Errorf("while reading the RDB's length: %w", err)
	}
	mark, length, err := parsePreamble(line)
	if err != nil {
		return res, err
	}
	res.Diskless = mark != nil
	if !res.Diskless && length < minRDBLen {
		return res, fmt.Errorf("%w: a payload of %d bytes, fewer than the %d of an empty database", ErrInvalid, length, minRDBLen)
	}
	check := newChecker(w)
	if err := check.header(s.r); err != nil {
		return res, err
	}
	payload := io.LimitReader(s.r, length)
	if res.Diskless {
		payload = &markReader{r: s.r, mark: mark, buf: make([]byte, 64<<10+eofMarkLen)}
	}
	// Every byte goes once through the checker to w; the preamble is read on the way.
	body := bufio.NewReaderSize(io.TeeReader(payload, check), 64<<10)
	if _, err := body.Discard(HeaderLen); err != nil {
		return res, err
	}
	pre := readPreamble(body)
	if err := drain(body); err != nil {
		return res, err
	}
	if !res.Diskless && check.n < length {
		return res, fmt.Errorf("%w: the connection ended after %d of %d bytes", ErrInvalid, check.n, length)
	}
	if res.Checksummed, err = check.finish(); err != nil {
		return res, err
	}
	res.Bytes, res.SHA256, res.RDBVersion = check.n, check.sum(), check.version
	res.Keys, res.Expires, res.RedisVersion = pre.keys, pre.expires, pre.aux["redis-ver"]
	if ctime, err := strconv.ParseInt(pre.aux["ctime"], 10, 64); err == nil {
		res.Created = time.Unix(ctime, 0).UTC()
	}
	return res, nil
}

// drain reads r to its end, in large reads: the reads pass through r's buffer untouched.
func drain(r io.Reader) error {
	buf := make([]byte, 256<<10)
	for {
		_, err := r.Read(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// command sends a command and reads its one-line answer: +... is success, -... an error.
func (s *session) command(args ...string) error {
	if _, err := s.w.Write(Encode(args...)); err != nil {
		return fmt.Errorf("while sending %s: %w", args[0], err)
	}
	line, err := s.readLine()
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(line, "+"):
		return nil
	case strings.HasPrefix(line, "-"):
		return replyError(line[1:])
	}
	return fmt.Errorf("%w: %q", ErrProtocol, line)
}

// readLine reads one line, skipping the bare newlines a node sends to keep the link alive
// while it prepares a snapshot, and returns it without its line end.
func (s *session) readLine() (string, error) {
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, len(line))
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("the node closed the connection: %w", io.ErrUnexpectedEOF)
			}
			return "", err
		}
		if text := strings.TrimRight(string(line), "\r\n"); text != "" {
			return text, nil
		}
	}
}

// replyError turns a Redis error reply into an error matching ErrAuth or ErrRefused.
func replyError(msg string) error {
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "WRONGPASS", "NOAUTH", "NOPERM":
		return fmt.Errorf("%w: %s", ErrAuth, msg)
	case "ERR":
		// Before Redis 6: "invalid password", "Client sent AUTH, but no password is set";
		// since: "AUTH <password> called without any password configured ...".
		for _, s := range []string{"invalid password", "no password is set", "without any password configured"} {
			if strings.Contains(msg, s) {
				return fmt.Errorf("%w: %s", ErrAuth, msg)
			}
		}
	}
	return fmt.Errorf("%w: %s", ErrRefused, msg)
}

// isUnknownOption reports whether err is a node's refusal of a REPLCONF option it does not
// know.
func isUnknownOption(err error) bool {
	return errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "Unrecognized REPLCONF option")
}

// parseFullResync reads "+FULLRESYNC <replid> <offset>".
func parseFullResync(line string) (string, int64, error) {
	if strings.HasPrefix(line, "-") {
		return "", 0, replyError(line[1:])
	}
	fields := strings.Fields(line)
	if len(fields) != 3 || fields[0] != "+FULLRESYNC" {
		return "", 0, fmt.Errorf("%w: %q where +FULLRESYNC <replid> <offset> was expected", ErrProtocol, line)
	}
	offset, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: offset in %q: %w", ErrProtocol, line, err)
	}
	return fields[1], offset, nil
}

// parsePreamble reads "$EOF:<mark>" (returning the mark) or "$<length>".
func parsePreamble(line string) (mark []byte, length int64, err error) {
	if strings.HasPrefix(line, "-") {
		return nil, 0, replyError(line[1:])
	}
	if m, ok := strings.CutPrefix(line, "$EOF:"); ok {
		if len(m) != eofMarkLen {
			return nil, 0, fmt.Errorf("%w: an EOF mark of %d bytes, not %d", ErrProtocol, len(m), eofMarkLen)
		}
		return []byte(m), 0, nil
	}
	if n, ok := strings.CutPrefix(line, "$"); ok {
		if length, err = strconv.ParseInt(n, 10, 64); err == nil && length >= 0 {
			return nil, length, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: %q where $<length> or $EOF:<mark> was expected", ErrProtocol, line)
}

// markReader reads r up to the mark, which it does not return. As a replica does, it looks
// for the mark at the end of what each read of r returns: the node sends nothing after it.
type markReader struct {
	r     io.Reader
	mark  []byte
	buf   []byte // buf[:held] is read from r and not yet returned
	held  int
	found bool
	err   error
}

func (m *markReader) Read(p []byte) (int, error) {
	for {
		// What cannot be part of the mark can be returned; all of it once the mark is found.
		if ready := m.held - eofMarkLen; m.found || ready > 0 {
			if m.found {
				ready = m.held
			}
			if ready == 0 {
				return 0, io.EOF
			}
			n := copy(p, m.buf[:ready])
			m.held = copy(m.buf, m.buf[n:m.held])
			return n, nil
		}
		if m.err != nil {
			if errors.Is(m.err, io.EOF) {
				return 0, fmt.Errorf("%w: the connection ended before the end mark", ErrInvalid)
			}
			return 0, m.err
		}
		var n int
		n, m.err = m.r.Read(m.buf[m.held:])
		m.held += n
		if m.held >= eofMarkLen && bytes.Equal(m.buf[m.held-eofMarkLen:m.held], m.mark) {
			m.found, m.held = true, m.held-eofMarkLen
		}
	}
}

// Encode writes a command as a RESP array of bulk strings, as a client sends it.
func Encode(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}
