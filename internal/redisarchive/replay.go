package redisarchive

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// DefaultWindow is how many commands Replay keeps in flight unless told otherwise.
const DefaultWindow = 1024

// ErrGap is a hole in the archive: a range of offsets no segment holds.
var ErrGap = errors.New("the archive has a gap")

// ReplayOptions says which archive to replay onto which node, from where to when.
type ReplayOptions struct {
	// Target is the node the commands go to (address, user, password, TLS). Its user needs
	// the written commands' permissions plus MULTI/EXEC and SELECT.
	Target rdbstream.Options
	// Cluster, Shard and Timeline name the archive (TimelinePrefix).
	Cluster, Shard string
	Timeline       int
	// From is the base's offset: the target already holds the history up to it (the base
	// backup was loaded into it). Commands up to From are skipped.
	From int64
	// Until, when not zero, is the target time: commands received after it are not applied.
	// A transaction (MULTI..EXEC) is applied whole when its MULTI was received by then.
	Until time.Time
	// UntilOffset, when above zero, stops after the last command ending at or before it.
	UntilOffset int64
	// Window is how many commands may wait for their replies (default DefaultWindow).
	Window int
	// Only, when set, keeps the replay to the keys of the slots it holds (a reload of lost
	// slots into a master that serves others): a command whose key is in another slot is
	// skipped (ReplayResult.Filtered), and one that reaches every key (FLUSHALL, FLUSHDB,
	// SWAPDB) stops the replay with a *NodeWideError rather than touch the other slots.
	Only func(slot int) bool
}

// NodeWideError is a command of the archive that reaches every key of its node (FLUSHALL,
// FLUSHDB, SWAPDB), met by a replay kept to some slots (ReplayOptions.Only).
type NodeWideError struct {
	// Command is its name, Offset the replication offset after it, Time its receive time.
	Command string
	Offset  int64
	Time    time.Time
}

// Error names the command and where it is.
func (e *NodeWideError) Error() string {
	return fmt.Sprintf("the archive holds a %s at offset %d (received %s), which a replay kept to some slots cannot apply without reaching the other slots' keys",
		strings.ToUpper(e.Command), e.Offset, e.Time.UTC().Format(time.RFC3339Nano))
}

// keyedSlot is the slot of the keys of a replicated command (every key of a command is in
// one slot in a cluster), and false for a command without keys (SELECT, MULTI, EXEC,
// FUNCTION). The key is the first argument, but for XGROUP and BITOP (after a subcommand or
// an operation).
func keyedSlot(name string, args [][]byte) (int, bool) {
	i := 1
	switch name {
	case "select", "multi", "exec", "discard", "function", "script":
		return 0, false
	case "xgroup", "bitop":
		i = 2
	}
	if len(args) <= i {
		return 0, false
	}
	return rdbload.KeySlot(args[i]), true
}

// ReplayResult is where a replay got to.
type ReplayResult struct {
	// Offset is the replication offset the target reached, and Reached the receive time of
	// the last command applied (zero when none was).
	Offset  int64
	Reached time.Time
	// Commands counts the commands sent (MULTI and EXEC included), Skipped those of the
	// replication's own (PING, REPLCONF) met on the way, Segments the segments read.
	Commands, Skipped, Segments int
	// Complete is true when the archive was read to its end without reaching the target
	// (restore to "latest"), false when the target time or offset stopped the replay.
	Complete bool
	// Filtered counts the commands left out for their keys' slot (ReplayOptions.Only).
	Filtered int
}

// Command is a command of the archive, as Scan shows it.
type Command struct {
	// Time is the receive time (Unix ms) and Offset the replication offset after it.
	Time, Offset int64
	// Name is the command's name, lower-cased; Args its arguments (the name first).
	Name string
	Args [][]byte
}

// Scan reads a timeline's segments in order and calls fn with every command after from,
// until fn returns an error (returned, except errStopScan) or the archive ends. It checks
// that the segments chain (ErrGap naming the missing range) and their integrity.
func Scan(ctx context.Context, sink Sink, cluster, shard string, timeline int, from int64, fn func(Command) error) error {
	return walk(ctx, sink, cluster, shard, timeline, from, func(_ Segment, r Record) error {
		args, err := splitCommand(r.Command)
		if err != nil {
			return err
		}
		return fn(Command{Time: r.Time, Offset: r.Offset, Name: lower(args[0]), Args: args})
	})
}

// errStop ends a walk early, without error.
var errStop = errors.New("stop")

// walk reads the segments of a timeline in offset order, checks that they chain from
// offset from on, and calls fn with every record after from.
func walk(ctx context.Context, sink Sink, cluster, shard string, timeline int, from int64, fn func(Segment, Record) error) error {
	names, err := sink.List(ctx, TimelinePrefix(cluster, shard, timeline))
	if err != nil {
		return fmt.Errorf("while listing the archive of shard %s: %w", shard, err)
	}
	type seg struct {
		name  string
		start int64
	}
	var segs []seg
	for _, n := range names {
		if start, ok := segmentStart(n); ok {
			segs = append(segs, seg{n, start})
		}
	}
	slices.SortFunc(segs, func(a, b seg) int { return int(min(max(a.start-b.start, -1), 1)) })
	// at is the offset after the last command passed to fn; covered the highest End read. A
	// segment may start before the previous one's End, after a follower stepped back over
	// PINGs (Follower.rewind): the records past at are then the continuation.
	at, covered := from, from
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].start <= at {
			continue // ends before the position, by the next one's start
		}
		if s.start > covered {
			return fmt.Errorf("%w: shard %s timeline %d has no segment for offsets %d..%d", ErrGap, shard, timeline, covered+1, s.start)
		}
		data, err := sink.Get(ctx, s.name)
		if err != nil {
			return fmt.Errorf("while reading %s: %w", s.name, err)
		}
		m, records, err := DecodeSegment(data)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if m.Start != s.start || m.Shard != shard || m.Timeline != timeline {
			return fmt.Errorf("%w: %s holds shard %s timeline %d from offset %d", ErrCorrupt, s.name, m.Shard, m.Timeline, m.Start)
		}
		for _, r := range records {
			if r.Offset <= at {
				continue
			}
			if err := fn(m, r); err != nil {
				if errors.Is(err, errStop) {
					return nil
				}
				return err
			}
			at = r.Offset
		}
		covered = max(covered, m.End)
	}
	return nil
}

// splitCommand returns the arguments of a command's RESP bytes (slices of raw).
func splitCommand(raw []byte) ([][]byte, error) {
	r := bufio.NewReader(bytes.NewReader(raw))
	if _, _, _, err := readCommand(r, nil, len(raw)+1); err != nil {
		return nil, err
	}
	var args [][]byte
	rest := raw[bytes.IndexByte(raw, '\n')+1:]
	for len(rest) > 0 {
		nl := bytes.IndexByte(rest, '\n')
		n, err := strconv.Atoi(string(rest[1 : nl-1]))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		args = append(args, rest[nl+1:nl+1+n])
		rest = rest[nl+1+n+2:]
	}
	return args, nil
}

// Replay sends a timeline's commands after opts.From to the target node, in order and
// pipelined, up to the target time or offset or the archive's end, and says where it got
// to. Commands of the replication's own (PING, REPLCONF GETACK) are skipped; SELECT, MULTI,
// EXEC and every write (Lua and functions come as their effects, expiries as PEXPIREAT) are
// sent as the master sent them. An archive that does not chain from From is an ErrGap
// error naming the missing range, before or after commands were applied; an error answer
// stops the replay, naming the command's offset and the node's words.
func Replay(ctx context.Context, sink Sink, opts ReplayOptions) (ReplayResult, error) {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	res := ReplayResult{Offset: opts.From, Complete: true}
	conn, err := rdbstream.Dial(ctx, opts.Target)
	if err != nil {
		return res, fmt.Errorf("while connecting to the target %s: %w", opts.Target.Addr, err)
	}
	defer func() { _ = conn.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	inFlight := make(chan int64, opts.Window) // the offset of each command sent
	replies := make(chan error, 1)
	go func() {
		replies <- readReplies(bufio.NewReaderSize(conn, 64<<10), inFlight)
		for range inFlight { // the sender stops at its next command
		}
	}()
	w := bufio.NewWriterSize(conn, 64<<10)
	send := func(cmd []byte, offset int64) error {
		select {
		case err := <-replies:
			replies <- err
			return err
		default:
		}
		if _, err := w.Write(cmd); err != nil {
			return err
		}
		select {
		case inFlight <- offset:
			return nil
		default:
		}
		if err := w.Flush(); err != nil {
			return err
		}
		select {
		case inFlight <- offset:
			return nil
		case err := <-replies:
			replies <- err
			return fmt.Errorf("the target stopped answering: %w", err)
		}
	}
	until := int64(-1)
	if !opts.Until.IsZero() {
		until = opts.Until.UnixMilli()
	}
	var (
		inMulti     bool
		beforeMulti ReplayResult // where the replay was before the open transaction
		lastSeg     Segment
	)
	err = walk(ctx, sink, opts.Cluster, opts.Shard, opts.Timeline, opts.From, func(m Segment, r Record) error {
		if m != lastSeg {
			res.Segments++
			lastSeg = m
		}
		name := commandName(r.Command)
		if name == "ping" || name == "replconf" {
			res.Skipped++
			return nil
		}
		if !inMulti && ((until >= 0 && r.Time > until) || (opts.UntilOffset > 0 && r.Offset > opts.UntilOffset)) {
			res.Complete = false
			return errStop
		}
		if opts.Only != nil {
			switch name {
			case "flushall", "flushdb", "swapdb":
				return &NodeWideError{Command: name, Offset: r.Offset, Time: time.UnixMilli(r.Time)}
			}
			args, err := splitCommand(r.Command)
			if err != nil {
				return err
			}
			if slot, keyed := keyedSlot(name, args); keyed && !opts.Only(slot) {
				res.Filtered++
				res.Offset = r.Offset
				return nil
			}
		}
		if name == "multi" {
			inMulti, beforeMulti = true, res
		}
		if err := send(r.Command, r.Offset); err != nil {
			return err
		}
		if name == "exec" {
			inMulti = false
		}
		res.Commands++
		res.Offset, res.Reached = r.Offset, time.UnixMilli(r.Time).UTC()
		if res.Commands == crashpoint.ReplayMidwayCommands && crashpoint.Armed(crashpoint.ArchiveReplayMidway) {
			// The commands sent reach the target and are applied before the crash.
			_ = w.Flush()
			time.Sleep(500 * time.Millisecond)
			crashpoint.Reach(crashpoint.ArchiveReplayMidway)
		}
		return nil
	})
	if err == nil && inMulti {
		// The archive ends inside a transaction: it was not applied.
		if err = send(rdbstream.Encode("DISCARD"), res.Offset); err == nil {
			commands := res.Commands + 1
			res = beforeMulti
			res.Commands, res.Complete = commands, false
		}
	}
	close(inFlight)
	if err != nil {
		_ = conn.Close()     // the replies of commands not flushed never come
		readErr := <-replies // the closed connection's
		_ = readErr
		return res, fmt.Errorf("while replaying shard %s onto %s: %w", opts.Shard, opts.Target.Addr, err)
	}
	if err := w.Flush(); err != nil {
		return res, fmt.Errorf("while replaying shard %s onto %s: %w", opts.Shard, opts.Target.Addr, err)
	}
	if err := <-replies; err != nil {
		return res, fmt.Errorf("while replaying shard %s onto %s: %w", opts.Shard, opts.Target.Addr, err)
	}
	return res, nil
}

// readReplies reads one reply per offset from inFlight, until it is closed; an error reply
// ends it with an error naming the command's offset.
func readReplies(r *bufio.Reader, inFlight <-chan int64) error {
	for offset := range inFlight {
		msg, err := readReply(r)
		if err != nil {
			return fmt.Errorf("while reading the answer to the command at offset %d: %w", offset, err)
		}
		if slot, ok := movedSlot(msg); ok {
			return &ForeignSlotError{Offset: offset, Slot: slot}
		}
		if msg != "" {
			return fmt.Errorf("the command ending at offset %d was refused: %s", offset, msg)
		}
	}
	return nil
}

// commandName returns a command's name, lower-cased, from its RESP bytes.
func commandName(raw []byte) string {
	// *<n>\r\n$<len>\r\n<name>\r\n
	first := bytes.IndexByte(raw, '\n')
	if first < 0 {
		return ""
	}
	rest := raw[first+1:]
	second := bytes.IndexByte(rest, '\n')
	if second < 0 {
		return ""
	}
	name := rest[second+1:]
	if end := bytes.IndexByte(name, '\r'); end >= 0 {
		name = name[:end]
	}
	return lower(name)
}

// ForeignSlotError is a replayed command the target refused with MOVED: it writes a key of a
// slot the target does not serve. A shard's archive holds such writes when slots migrated
// to the shard inside the replayed window (the target master of a migration receives the
// keys as RESTOREs, then their clients' writes), while the restored cluster's slot map is
// its bases', taken before the migration.
type ForeignSlotError struct {
	// Offset is the replication offset after the refused command, Slot its key's slot.
	Offset int64
	Slot   int
}

// Error says which command was refused and why.
func (e *ForeignSlotError) Error() string {
	return fmt.Sprintf("the command ending at offset %d writes slot %d, which the shard did not serve at its base (MOVED)", e.Offset, e.Slot)
}

// movedSlot reads the slot of a MOVED error reply ("MOVED <slot> <addr>").
func movedSlot(msg string) (int, bool) {
	rest, ok := strings.CutPrefix(msg, "MOVED ")
	if !ok {
		return 0, false
	}
	slot, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(slot)
	return n, err == nil
}
