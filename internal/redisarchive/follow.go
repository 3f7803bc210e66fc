package redisarchive

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// Defaults of Options.
const (
	DefaultSegmentBytes = 16 << 20
	DefaultSegmentAge   = 500 * time.Millisecond
	DefaultKeepAlive    = 45 * time.Second
	DefaultGetAckPause  = 2 * time.Second
	DefaultRetryDelay   = time.Second
)

// headroom is the room kept before the records of the open segment, where the magic and
// the manifest are written when it closes, so that it is uploaded without a copy.
const headroom = 1024

// Position is a point of a shard's replication history: the history with ID ReplID (or one
// a master continued from it) up to and including the byte at Offset.
type Position struct {
	// ReplID is the replication ID, as +FULLRESYNC (a base backup) or +CONTINUE said it.
	ReplID string `json:"replid"`
	// Offset is the replication offset: the base holds the history up to it.
	Offset int64 `json:"offset"`
}

// Options says which shard to follow, from where, and where its segments go.
type Options struct {
	// Conn is how to reach the master: address, ACL user and password (the user needs PSYNC
	// and REPLCONF), TLS, dial and idle timeouts (the master PINGs its replicas every
	// repl-ping-replica-period, 10 s by default, so a silence of IdleTimeout means a dead
	// link).
	Conn rdbstream.Options
	// Master, when set, is asked for the address to follow before every connection (a
	// failover moves the master); Conn.Addr otherwise. A replica of the shard serves as well
	// as its master, and keeps the follower out of the master's sight (see the package
	// documentation).
	Master func(ctx context.Context) (string, error)
	// Cluster, Shard and Timeline name the segments (SegmentName).
	Cluster, Shard string
	Timeline       int
	// From is where the archive starts or resumes: a base backup's replication ID and offset
	// (rdbstream.Result), or the end of the last segment (Resume).
	From Position
	// Sink receives the closed segments.
	Sink Sink
	// SegmentBytes and SegmentAge close a segment when its records reach SegmentBytes or its
	// first command is SegmentAge old, whichever comes first (defaults DefaultSegmentBytes,
	// DefaultSegmentAge).
	SegmentBytes int
	SegmentAge   time.Duration
	// KeepAlive is how long one connection is kept before the follower reconnects (PSYNC
	// from where it is): it never acknowledges the stream, and a master drops a replica
	// whose last acknowledgement is repl-timeout (60 s by default) old. Default
	// DefaultKeepAlive; negative: never.
	KeepAlive time.Duration
	// GetAckPause is how long the follower stays away after a REPLCONF GETACK in the stream
	// (a SHUTDOWN, WAIT or failover asking its replicas where they are) before it reconnects:
	// it leaves rather than answer (default DefaultGetAckPause; negative: ignore GETACK and
	// stay).
	GetAckPause time.Duration
	// RetryDelay is the wait before connecting again after a failed connection (default
	// DefaultRetryDelay).
	RetryDelay time.Duration
	// MaxCommand bounds one command (default DefaultMaxCommand).
	MaxCommand int
	// Now is the clock of the receive times (default time.Now).
	Now func() time.Time
}

// GapError is the end of a timeline: the master could not continue the history from the
// follower's position (the offset is no longer in its replication backlog, or the history is
// another) and offered a full resynchronization instead. The archive holds the history up
// to From; what follows needs a new base and a new timeline.
type GapError struct {
	// From is where the archive of this timeline ends.
	From Position
	// Addr is the master that refused; ReplID and Offset what it offered (+FULLRESYNC).
	Addr   string
	ReplID string
	Offset int64
}

// Error says where the history broke.
func (e *GapError) Error() string {
	return fmt.Sprintf("gap in the archive: %s cannot continue history %s after offset %d (it offered a full resync at %s:%d); a new timeline needs a new base",
		e.Addr, e.From.ReplID, e.From.Offset, e.ReplID, e.Offset)
}

// Progress is what a follower has done so far.
type Progress struct {
	// ReplID is the history the follower is in (the last master's +CONTINUE).
	ReplID string
	// Received is the replication offset of the last whole command received; Archived the
	// End of the last segment the sink accepted (what survives a crash of the follower).
	Received, Archived int64
	// LastArchived is the receive time of the last command in the sink.
	LastArchived time.Time
	// Segments and Commands count what went to the sink; Open the commands received and not
	// yet there (in the open segment or the one being written); Connections the PSYNCs answered +CONTINUE; Rewinds the steps back over
	// PINGs and GETACKs a new master did not have (see the package documentation).
	Segments, Commands, Open, Connections, Rewinds int
	// LastError is the error of the last failed connection since the last one that
	// continued the stream, "" when none failed since (a reconnection for KeepAlive or after
	// a GETACK is no failure).
	LastError string
	// LastFlush is the receive time of the last FLUSHALL or FLUSHDB received (zero when
	// none was), and LastFlushOffset the offset after it: a restore to a time before it
	// undoes it.
	LastFlush       time.Time
	LastFlushOffset int64
}

// Follower follows one shard's master's write stream over the replication protocol and
// writes it to a Sink in segments. See the package documentation.
type Follower struct {
	opts Options

	stopOnce sync.Once
	stop     chan struct{}

	mu       sync.Mutex // guards the open segment and progress
	progress Progress
	open     []byte // headroom + records of the open segment
	spare    []byte
	seg      Segment // Start, End, FirstTime, LastTime, Commands of the open segment
	putting  int     // the commands of the segment being written to the sink
	conn     *connection

	dataEnd int64 // the offset after the last stored command (or From)

	putMu  sync.Mutex // serializes closing segments
	putErr error
}

// NewFollower checks opts and fills in the defaults.
func NewFollower(opts Options) (*Follower, error) {
	if opts.Sink == nil || opts.Cluster == "" || opts.Shard == "" || opts.Timeline < 1 || opts.From.ReplID == "" || opts.From.Offset < 0 {
		return nil, errors.New("a follower needs a sink, a cluster, a shard, a timeline from 1 and a starting replication ID and offset")
	}
	if opts.Master == nil && opts.Conn.Addr == "" {
		return nil, errors.New("a follower needs the master's address")
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.SegmentAge <= 0 {
		opts.SegmentAge = DefaultSegmentAge
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.GetAckPause == 0 {
		opts.GetAckPause = DefaultGetAckPause
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.MaxCommand <= 0 {
		opts.MaxCommand = DefaultMaxCommand
	}
	if opts.Conn.DialTimeout <= 0 {
		opts.Conn.DialTimeout = rdbstream.DefaultDialTimeout
	}
	if opts.Conn.IdleTimeout <= 0 {
		opts.Conn.IdleTimeout = rdbstream.DefaultIdleTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Follower{opts: opts, stop: make(chan struct{}), open: make([]byte, headroom, headroom+4096)}
	f.progress.ReplID, f.progress.Received, f.progress.Archived = opts.From.ReplID, opts.From.Offset, opts.From.Offset
	f.dataEnd = opts.From.Offset
	f.seg = Segment{Cluster: opts.Cluster, Shard: opts.Shard, Timeline: opts.Timeline, Start: opts.From.Offset, End: opts.From.Offset}
	return f, nil
}

// Progress returns what the follower has done so far.
func (f *Follower) Progress() Progress {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.progress
	p.Open = f.seg.Commands + f.putting
	return p
}

// Stop makes Run close the open segment and return nil. It does not wait.
func (f *Follower) Stop() {
	f.stopOnce.Do(func() {
		close(f.stop)
		f.breakConn()
	})
}

// Reasons a connection ends that are no failure.
var (
	errKeepAlive = errors.New("keep-alive reconnection")
	errGetAck    = errors.New("left on REPLCONF GETACK")
	errStopped   = errors.New("stopped")
	errRewound   = errors.New("stepped back to the last write")
)

// ErrNoMasterLink: the node asked is a replica with no link to its master (its master is
// gone, restarting, or the replica is resyncing): it serves no stream until it has one, and
// its master may be the one to ask. Run returns it, after closing the open segment.
var ErrNoMasterLink = errors.New("NOMASTERLINK")

// Run follows the stream until Stop (it then closes the open segment and returns nil), the
// context ends (the open segment is abandoned, as a crash would: the archive ends at the
// last closed segment, where Resume picks it up), the sink fails, the master refuses the
// credentials, or the history breaks (a *GapError, after the open segment is closed). A
// connection that fails is retried after RetryDelay, at the address Master gives.
func (f *Follower) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go f.closeByAge(ctx, done)
	for {
		err := f.session(ctx)
		var gap *GapError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case f.failed() != nil:
			return f.failed()
		case errors.Is(err, errStopped) || f.stopped():
			return f.closeSegment(ctx)
		case errors.As(err, &gap):
			if putErr := f.closeSegment(ctx); putErr != nil {
				return putErr
			}
			return gap
		case errors.Is(err, rdbstream.ErrAuth):
			return err
		case errors.Is(err, ErrNoMasterLink):
			if putErr := f.closeSegment(ctx); putErr != nil {
				return putErr
			}
			return err
		}
		wait := f.opts.RetryDelay
		switch {
		case errors.Is(err, errKeepAlive), errors.Is(err, errRewound):
			wait = 0
		case errors.Is(err, errGetAck):
			wait = f.opts.GetAckPause
		default:
			f.mu.Lock()
			f.progress.LastError = err.Error()
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.stop:
			return f.closeSegment(ctx)
		case <-time.After(wait):
		}
	}
}

func (f *Follower) stopped() bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}

func (f *Follower) failed() error {
	f.putMu.Lock()
	defer f.putMu.Unlock()
	return f.putErr
}

// closeByAge closes the open segment once its first command is SegmentAge old.
func (f *Follower) closeByAge(ctx context.Context, done chan struct{}) {
	tick := time.NewTicker(max(f.opts.SegmentAge/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		f.mu.Lock()
		due := f.seg.Commands > 0 && f.opts.Now().UnixMilli()-f.seg.FirstTime >= f.opts.SegmentAge.Milliseconds()
		f.mu.Unlock()
		if due {
			if err := f.closeSegment(ctx); err != nil {
				f.breakConn()
				return
			}
		}
	}
}

// breakConn ends the current connection's reads.
func (f *Follower) breakConn() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.breakNow()
	}
}

// closeSegment sends the open segment, if it holds a command, to the sink. A failure is kept
// (Run returns it): the follower stops rather than go on with a hole.
func (f *Follower) closeSegment(ctx context.Context) error {
	f.putMu.Lock()
	defer f.putMu.Unlock()
	if f.putErr != nil {
		return f.putErr
	}
	f.mu.Lock()
	if f.seg.Commands == 0 {
		f.mu.Unlock()
		return nil
	}
	m, buf := f.seg, f.open
	f.putting = m.Commands
	f.open = f.spare[:0]
	if f.open == nil {
		f.open = make([]byte, 0, headroom+4096)
	}
	f.open = f.open[:headroom]
	f.spare = nil
	f.seg.Start, f.seg.FirstTime, f.seg.LastTime, f.seg.Commands = f.seg.End, 0, 0, 0
	f.mu.Unlock()

	data, m, err := encodeInPlace(m, buf)
	if err == nil {
		err = f.opts.Sink.Put(ctx, SegmentName(m.Cluster, m.Shard, m.Timeline, m.Start), data)
	}
	if err != nil {
		f.putErr = fmt.Errorf("while archiving offsets %d..%d of shard %s: %w", m.Start, m.End, m.Shard, err)
		return f.putErr
	}
	f.mu.Lock()
	f.putting = 0
	f.progress.Archived, f.progress.LastArchived = m.End, m.Last()
	f.progress.Segments++
	f.progress.Commands += m.Commands
	if cap(buf) <= 2*(f.opts.SegmentBytes+headroom) {
		f.spare = buf[:0]
	}
	f.mu.Unlock()
	return nil
}

// encodeInPlace writes the magic and manifest into the headroom before the records, when
// they fit, and returns the segment object.
func encodeInPlace(m Segment, buf []byte) ([]byte, Segment, error) {
	body := buf[headroom:]
	head, m, err := segmentHeader(m, body)
	if err != nil {
		return nil, m, err
	}
	if len(head) <= headroom {
		start := headroom - len(head)
		copy(buf[start:], head)
		return buf[start:], m, nil
	}
	return append(head, body...), m, nil
}

// connection is one PSYNC exchange with a master: every read must see data within idle,
// and cut makes every read fail at once, even one already waiting.
type connection struct {
	conn net.Conn
	idle time.Duration
	mu   sync.Mutex
	cut  bool
}

func (c *connection) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.cut {
		c.mu.Unlock()
		return 0, errCut
	}
	err := c.conn.SetReadDeadline(time.Now().Add(c.idle))
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.conn.Read(p)
}

// breakNow makes the reads fail.
func (c *connection) breakNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	_ = c.conn.SetDeadline(time.Unix(1, 0))
}

// rewind steps the follower back to the end of the last stored command when only the
// replication's own bytes (PING, REPLCONF GETACK) came after it, and says whether it did.
// An old master sends those after its replica was promoted (a GETACK as it shuts down, a
// PING): the new master's history forked before them, and it continues from the last
// write, which is all the archive needs.
func (f *Follower) rewind() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dataEnd >= f.progress.Received {
		return false
	}
	f.progress.Received, f.seg.End = f.dataEnd, f.dataEnd
	f.progress.Rewinds++
	if f.seg.Commands == 0 {
		f.seg.Start = f.dataEnd
	}
	return true
}

// errCut is a read of a connection the follower cut.
var errCut = errors.New("connection cut")

// session connects once, asks to continue from where the follower is, and archives the
// stream until the connection ends.
func (f *Follower) session(ctx context.Context) error {
	opts := f.opts.Conn
	if f.opts.Master != nil {
		addr, err := f.opts.Master(ctx)
		if err != nil {
			return fmt.Errorf("while looking up the master of shard %s: %w", f.opts.Shard, err)
		}
		opts.Addr = addr
	}
	conn, err := rdbstream.Dial(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	c := &connection{conn: conn, idle: opts.IdleTimeout}
	f.mu.Lock()
	f.conn = c
	from := Position{ReplID: f.progress.ReplID, Offset: f.progress.Received}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.conn = nil
		f.mu.Unlock()
	}()
	if f.stopped() {
		return errStopped
	}
	stop := context.AfterFunc(ctx, c.breakNow)
	defer stop()
	r := bufio.NewReaderSize(c, 64<<10)

	if err := conn.SetWriteDeadline(time.Now().Add(opts.DialTimeout)); err != nil {
		return err
	}
	if _, err := conn.Write(rdbstream.Encode("REPLCONF", "capa", "eof", "capa", "psync2")); err != nil {
		return fmt.Errorf("while sending REPLCONF to %s: %w", opts.Addr, err)
	}
	if line, err := readLine(r); err != nil || string(line) != "+OK" {
		return fmt.Errorf("REPLCONF capa to %s: %q %w", opts.Addr, line, errOr(err))
	}
	if _, err := conn.Write(rdbstream.Encode("PSYNC", from.ReplID, strconv.FormatInt(from.Offset+1, 10))); err != nil {
		return fmt.Errorf("while sending PSYNC to %s: %w", opts.Addr, err)
	}
	var line []byte
	for len(line) == 0 { // a master may send newlines while it prepares
		if line, err = r.ReadSlice('\n'); err != nil {
			return fmt.Errorf("while reading the answer to PSYNC from %s: %w", opts.Addr, noEOF(err))
		}
		line = []byte(strings.TrimRight(string(line), "\r\n"))
	}
	fields := strings.Fields(string(line))
	switch {
	case fields[0] == "+FULLRESYNC" && len(fields) == 3:
		if f.rewind() {
			return fmt.Errorf("%w: %s cannot continue after offset %d", errRewound, opts.Addr, from.Offset)
		}
		off, _ := strconv.ParseInt(fields[2], 10, 64)
		return &GapError{From: from, Addr: opts.Addr, ReplID: fields[1], Offset: off}
	case fields[0] == "+CONTINUE":
	case strings.HasPrefix(fields[0], "-"):
		reply := string(line[1:])
		if rest, ok := strings.CutPrefix(reply, ErrNoMasterLink.Error()); ok {
			return fmt.Errorf("%s refused PSYNC %s %d: %w%s", opts.Addr, from.ReplID, from.Offset+1, ErrNoMasterLink, rest)
		}
		return fmt.Errorf("%s refused PSYNC %s %d: %s", opts.Addr, from.ReplID, from.Offset+1, reply)
	default:
		return fmt.Errorf("%w: %q from %s where +CONTINUE or +FULLRESYNC was expected", ErrProtocol, line, opts.Addr)
	}
	f.mu.Lock()
	if len(fields) > 1 {
		f.progress.ReplID = fields[1]
	}
	f.seg.ReplID = f.progress.ReplID
	f.progress.Connections++
	f.progress.LastError = ""
	f.mu.Unlock()
	_ = conn.SetWriteDeadline(time.Time{})

	var keepSince time.Time
	if f.opts.KeepAlive > 0 {
		keepSince = time.Now()
		timer := time.AfterFunc(f.opts.KeepAlive, c.breakNow)
		defer timer.Stop()
	}
	return f.stream(ctx, r, opts.Addr, keepSince)
}

func errOr(err error) error {
	if err == nil {
		return ErrProtocol
	}
	return err
}

// stream archives commands until the connection ends. keepSince is when a keep-alive
// connection started (zero: no keep-alive), to tell its deadline from a failure.
func (f *Follower) stream(ctx context.Context, r *bufio.Reader, addr string, keepSince time.Time) error {
	var scratch []byte
	for {
		var name, arg1 string
		var err error
		scratch, name, arg1, err = readCommand(r, scratch[:0], f.opts.MaxCommand)
		if err != nil {
			if f.stopped() {
				return errStopped
			}
			if ctx.Err() == nil && !keepSince.IsZero() && time.Since(keepSince) >= f.opts.KeepAlive {
				return errKeepAlive
			}
			return fmt.Errorf("while following %s: %w", addr, err)
		}
		now := f.opts.Now().UnixMilli()
		full := false
		f.mu.Lock()
		f.progress.Received += int64(len(scratch))
		f.seg.End = f.progress.Received
		keep := name != "ping" && name != "replconf"
		if keep && f.seg.Commands > 0 && len(f.open)-headroom+recordHeaderLen+len(scratch) > f.opts.SegmentBytes {
			// The record would take the segment past its size: close it first, so that
			// no buffer grows beyond SegmentBytes (but for one command larger alone).
			f.seg.End -= int64(len(scratch))
			f.mu.Unlock()
			if err := f.closeSegment(ctx); err != nil {
				return err
			}
			f.mu.Lock()
			f.seg.End += int64(len(scratch))
		}
		if name == "flushall" || name == "flushdb" {
			f.progress.LastFlush, f.progress.LastFlushOffset = time.UnixMilli(now).UTC(), f.seg.End
		}
		if keep {
			f.dataEnd = f.seg.End
			f.open = grow(f.open, recordHeaderLen+len(scratch), headroom+f.opts.SegmentBytes)
			f.open = appendRecord(f.open, now, f.seg.End, scratch)
			if f.seg.Commands == 0 {
				f.seg.FirstTime = now
			}
			f.seg.LastTime = now
			f.seg.Commands++
			full = len(f.open)-headroom >= f.opts.SegmentBytes
		}
		f.mu.Unlock()
		if cap(scratch) > 1<<20 {
			scratch = nil
		}
		if full {
			if err := f.closeSegment(ctx); err != nil {
				return err
			}
		}
		if name == "replconf" && arg1 == "getack" && f.opts.GetAckPause > 0 {
			return errGetAck
		}
	}
}

// grow returns buf with room for n more bytes: its capacity doubles as append's would, but
// stops at limit unless n alone needs more.
func grow(buf []byte, n, limit int) []byte {
	if len(buf)+n <= cap(buf) {
		return buf
	}
	size := min(max(2*cap(buf), len(buf)+n), max(limit, len(buf)+n))
	out := make([]byte, len(buf), size)
	copy(out, buf)
	return out
}

// Resume returns where the archive of a shard's timeline ends: the replication ID of its
// last segment and the offset after its last command (the segment's End may count PINGs
// after it, which a promoted replica's history need not share), from which a new follower
// continues. ok is false when the timeline
// has no segment.
func Resume(ctx context.Context, sink Sink, cluster, shard string, timeline int) (pos Position, ok bool, err error) {
	names, err := sink.List(ctx, TimelinePrefix(cluster, shard, timeline))
	if err != nil {
		return pos, false, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		if _, isSeg := segmentStart(names[i]); !isSeg {
			continue
		}
		data, err := sink.Get(ctx, names[i])
		if err != nil {
			return pos, false, err
		}
		m, records, err := DecodeSegment(data)
		if err != nil {
			return pos, false, fmt.Errorf("%s: %w", names[i], err)
		}
		end := m.Start
		if len(records) > 0 {
			end = records[len(records)-1].Offset
		}
		return Position{ReplID: m.ReplID, Offset: end}, true, nil
	}
	return pos, false, nil
}

// LastWrite is the receive time of the last command a timeline's archive holds (its last
// segment with commands; zero when it holds none): a replay of the timeline to a later time
// reads it to its end.
func LastWrite(ctx context.Context, sink Sink, cluster, shard string, timeline int) (time.Time, error) {
	names, err := sink.List(ctx, TimelinePrefix(cluster, shard, timeline))
	if err != nil {
		return time.Time{}, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		if _, isSeg := segmentStart(names[i]); !isSeg {
			continue
		}
		data, err := sink.Get(ctx, names[i])
		if err != nil {
			return time.Time{}, err
		}
		m, _, err := DecodeSegment(data)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", names[i], err)
		}
		if m.Commands > 0 {
			return m.Last(), nil
		}
	}
	return time.Time{}, nil
}
