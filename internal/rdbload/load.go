package rdbload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// DefaultWindow is the number of commands Load keeps in flight by default. One load alone
// on loopback gets no faster past a few hundred, but three side by side on two cores (a
// restore's masters) do: with 512 the nodes idled between the loader's turns, 1.10x
// redis-cli --pipe; with 8192, 1.00x, and the loader's CPU per key below redis-cli's
// (BenchmarkLoadShardsAgainstRedisCLI with MWO_BENCH_RDB_SHARD_WINDOWS). In-flight bytes
// stay bounded by the socket buffers: Redis reads a connection only as fast as it runs it.
const DefaultWindow = 8192

// Options says where and how Load restores.
type Options struct {
	// Node is the node to restore into and how to reach it: address, user and password,
	// TLS, dial timeout, and IdleTimeout (default rdbstream.DefaultIdleTimeout), the longest
	// a write may block or an answer be awaited: a frozen node fails the load after it.
	Node rdbstream.Options
	// Window is the number of commands in flight (default DefaultWindow).
	Window int
	// Slots, when not empty, restricts the load to the keys of these slots; the others are
	// counted as skipped.
	Slots []SlotRange
	// Now is the clock keys' expiries are compared with (default time.Now).
	Now func() time.Time
	// MaxRecord is the largest record loaded, in bytes: a key with its value as a DUMP
	// payload, or a function library (default DefaultMaxRecord). A larger one fails the load
	// with ErrTooLarge, naming the key. Whatever it is, the process holds one record larger
	// than 1 MiB at a time across all its loads; the others wait for it.
	MaxRecord int64
}

// Result counts what Load did.
type Result struct {
	// Restored keys (after an error: the keys sent, of which the last window may not have
	// been applied); Skipped keys outside Options.Slots; Expired keys already past their
	// expiry, not sent.
	Restored, Skipped, Expired int64
	// Functions is the number of function libraries loaded.
	Functions int64
	// Bytes is the number of bytes of the RDB read.
	Bytes int64
	// RDBVersion is the RDB's format version.
	RDBVersion int
}

// Load reads the RDB r holds and restores its keys and function libraries into the node of
// opts.Node: SET key value [PXAT ms] per string key when the node's ACL lets the user run
// SET (cheaper for the node than RESTORE, and the same value), RESTORE key ttl payload
// REPLACE ABSTTL per other key, FUNCTION LOAD
// REPLACE per library, pipelined on one connection with opts.Window commands in flight. The caller
// makes sure the node is a master that owns the slots of the keys it is given. It returns
// at the RDB's end (checksum checked) with every command acknowledged, or at the first
// error: the RDB's (corrupt, unsupported), the input's, the connection's, or a command's,
// naming the key and the node's answer. What was restored before an error stays on the
// node.
func Load(ctx context.Context, opts Options, r io.Reader) (Result, error) {
	var res Result
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Node.IdleTimeout <= 0 {
		opts.Node.IdleTimeout = rdbstream.DefaultIdleTimeout
	}
	var slots *slotSet
	if len(opts.Slots) > 0 {
		var err error
		if slots, err = newSlotSet(opts.Slots); err != nil {
			return res, fmt.Errorf("Options.Slots: %w", err)
		}
	}
	conn, err := rdbstream.Dial(ctx, opts.Node)
	if err != nil {
		return res, fmt.Errorf("while connecting to %s to load an RDB: %w", opts.Node.Addr, err)
	}
	p := newPipeline(ctx, conn, opts.Window, opts.Node.IdleTimeout)
	useSet, useMSet, err := p.writesAllowed()
	p.start()
	rd := NewReader(r)
	rd.SetMaxRecord(opts.MaxRecord)
	rd.gated(ctx)
	rd.unsealed = true // feed seals the payloads it sends as RESTORE
	defer rd.release()
	if err == nil {
		var batch *slotBatcher
		if useMSet {
			batch = newSlotBatcher(heldBudget(slots.count()), func(keys int, args []byte) error {
				res.Restored += int64(keys)
				return p.sendMSet(keys, args)
			})
		}
		err = feed(rd, p, slots, batch, opts.Now, useSet, &res)
	}
	res.Bytes, res.RDBVersion = rd.BytesRead(), rd.Version()
	if cerr := p.close(err == nil); err == nil {
		err = cerr
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return res, fmt.Errorf("while loading an RDB into %s: %w", opts.Node.Addr, err)
	}
	return res, nil
}

// feed sends every record of rd through p, strings as SET when useSet, the small ones
// without an expiry through batch (as MSET) when it is not nil.
func feed(rd *Reader, p *pipeline, slots *slotSet, batch *slotBatcher, now func() time.Time, useSet bool, res *Result) error {
	var ttl []byte
	var strs stringReader
	nowMs := now().UnixMilli()
	for n := 0; ; n++ {
		p.link.feeding.Store(true)
		rec, err := rd.Next()
		p.link.feeding.Store(false)
		if errors.Is(err, io.EOF) {
			if batch != nil {
				return batch.flushAll()
			}
			return nil
		}
		if err != nil {
			return err
		}
		if n%1024 == 0 {
			nowMs = now().UnixMilli()
		}
		switch {
		case rec.Kind == KindFunction:
			err = p.send(verbFunction, nil, cmdFunction, cmdLoad, cmdReplace, rec.Payload)
			res.Functions++
		case slots != nil && !slots.has(rec.Slot):
			res.Skipped++
		case rec.ExpireAtMs != 0 && rec.ExpireAtMs <= nowMs:
			res.Expired++
		default:
			err = sendKey(p, batch, rec, useSet, &strs, &ttl, res)
		}
		if err != nil {
			return err
		}
	}
}

// sendKey sends one key: held for an MSET when batch takes it (batch counts it as it sends
// it), else as SET (a string, when useSet) or RESTORE, after the keys held for its slot.
func sendKey(p *pipeline, batch *slotBatcher, rec *Record, useSet bool, strs *stringReader, ttl *[]byte, res *Result) error {
	value, isString := []byte(nil), false
	if useSet {
		value, isString = strs.plainString(rec.Payload)
	}
	if batch != nil {
		if isString && rec.ExpireAtMs == 0 && len(rec.Key)+len(value) <= maxHeldString {
			return batch.add(rec.Slot, rec.Key, value)
		}
		if err := batch.flush(rec.Slot); err != nil {
			return err
		}
	}
	res.Restored++
	*ttl = strconv.AppendInt((*ttl)[:0], rec.ExpireAtMs, 10)
	switch {
	case isString && rec.ExpireAtMs == 0:
		return p.send(verbSet, rec.Key, cmdSet, rec.Key, value)
	case isString:
		return p.send(verbSet, rec.Key, cmdSet, rec.Key, value, cmdPXAt, *ttl)
	default:
		seal(rec.Payload)
		return p.send(verbRestore, rec.Key, cmdRestore, rec.Key, *ttl, rec.Payload, cmdReplace, cmdAbsTTL)
	}
}

// The words of the commands Load sends.
var (
	cmdSet      = []byte("SET")
	cmdPXAt     = []byte("PXAT")
	cmdRestore  = []byte("RESTORE")
	cmdReplace  = []byte("REPLACE")
	cmdAbsTTL   = []byte("ABSTTL")
	cmdFunction = []byte("FUNCTION")
	cmdLoad     = []byte("LOAD")
)
