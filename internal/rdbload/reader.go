package rdbload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// MaxVersion is the newest RDB version Reader reads: 12, written by Redis 7.4 (7.0 writes
// 10, 7.2 writes 11). Every opcode and value type of versions up to it is known.
const MaxVersion = 12

// Errors a caller can match with errors.Is.
var (
	// ErrCorrupt: the input is not a well-formed RDB (a bad length, encoding or checksum, or
	// it ends early).
	ErrCorrupt = errors.New("corrupt RDB")
	// ErrUnsupported: a well-formed RDB holding what cannot be restored through RESTORE
	// (module data, a database other than 0, a newer RDB version).
	ErrUnsupported = errors.New("RDB content not supported")
)

// Kind says what a Record carries.
type Kind int

const (
	// KindKey is a key and its value, ready for RESTORE.
	KindKey Kind = iota
	// KindFunction is a function library, for FUNCTION LOAD REPLACE.
	KindFunction
)

// Record is one key of an RDB, or one function library. Its slices are valid until the next
// call to Next.
type Record struct {
	Kind Kind
	// Key is the key's name (KindKey).
	Key []byte
	// Payload is the key's value as a DUMP payload, for RESTORE (KindKey); the library's
	// code (KindFunction).
	Payload []byte
	// ExpireAtMs is the key's expiry in Unix milliseconds; 0 for none.
	ExpireAtMs int64
	// Slot is the key's hash slot.
	Slot int
}

// RDB opcodes (src/rdb.h RDB_OPCODE_*).
const (
	opSlotInfo      = 0xF4
	opFunction2     = 0xF5
	opFunctionPreGA = 0xF6
	opModuleAux     = 0xF7
	opIdle          = 0xF8
	opFreq          = 0xF9
	opAux           = 0xFA
	opResizeDB      = 0xFB
	opExpireTimeMs  = 0xFC
	opExpireTime    = 0xFD
	opSelectDB      = 0xFE
	opEOF           = 0xFF
)

// Reader reads an RDB one record at a time, with memory bounded by the largest record it
// admits (SetMaxRecord, DefaultMaxRecord unless set): its buffers grow as a record's bytes
// arrive, are reused from record to record, and dropped after a record larger than 1 MiB.
// Any input ends in a record, io.EOF or an error: ErrCorrupt (truncated or malformed, a
// length or LZF claim no RDB can hold), ErrUnsupported, ErrTooLarge, or the input's own.
type Reader struct {
	src     *source
	version int
	rec     Record
	code    []byte // the last function library's code
	done    bool
	// Checksummed is set at the end when the RDB carried a CRC-64 (it matched); false when
	// the writer ran with rdbchecksum no.
	checksummed bool
	// unsealed: keys' payloads are left without their CRC-64 (eight zero bytes) until seal;
	// Load sets it, as most strings go as SET, which needs none.
	unsealed bool
}

// NewReader returns a Reader of the RDB r holds, holding records up to DefaultMaxRecord.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: newSource(r)}
}

// SetMaxRecord sets the largest record the Reader holds, in bytes (a key and its DUMP
// payload, or a function library's code); n <= 0 sets DefaultMaxRecord. A larger record, or
// a length claiming one, fails Next with ErrTooLarge before it is read.
func (r *Reader) SetMaxRecord(n int64) {
	if n <= 0 {
		n = DefaultMaxRecord
	}
	r.src.setMaxRecord(n)
}

// gated makes the Reader take bigRecords for a record larger than smallRecord, waiting for it
// at most until ctx ends. The caller calls release when it stops reading.
func (r *Reader) gated(ctx context.Context) {
	r.src.gate, r.src.ctx = bigRecords, ctx
}

// release drops the buffers of a large record, and bigRecords if held.
func (r *Reader) release() {
	if cap(r.rec.Key) > smallRecord {
		r.rec.Key = nil
	}
	if cap(r.code) > smallRecord {
		r.code = nil
	}
	r.src.release()
}

// Version is the RDB version of the input, known after the first call to Next.
func (r *Reader) Version() int { return r.version }

// BytesRead is the number of bytes of the input consumed so far.
func (r *Reader) BytesRead() int64 { return r.src.n }

// Checksummed reports, once Next returned io.EOF, whether the RDB carried a checksum (which
// then matched): false when its writer ran with rdbchecksum no.
func (r *Reader) Checksummed() bool { return r.checksummed }

// Next returns the next record, or io.EOF after the EOF opcode, a matching checksum and the
// end of the input (bytes after the RDB, or an error of the input there, are errors). Any
// other error is final; a record returned before it may hold garbage only when the input
// was corrupted in a way that only the final checksum reveals.
func (r *Reader) Next() (*Record, error) {
	r.release()
	if r.done {
		return nil, io.EOF
	}
	var rec *Record
	err := r.header()
	if err == nil {
		rec, err = r.next()
	}
	if err != nil {
		r.src.recording = false
		r.release()
		if !errors.Is(err, io.EOF) {
			err = fmt.Errorf("at byte %d of the RDB: %w", r.src.n, err)
		}
	}
	return rec, err
}

// header reads the RDB's header, once.
func (r *Reader) header() error {
	if r.version != 0 {
		return nil
	}
	head, err := r.src.next(rdbstream.HeaderLen)
	if err != nil {
		return fmt.Errorf("while reading the header: %w", err)
	}
	version, err := rdbstream.ParseHeader(head)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if version > MaxVersion {
		return fmt.Errorf("%w: RDB version %d is newer than %d (Redis 7.4), the newest this loader knows", ErrUnsupported, version, MaxVersion)
	}
	r.version = version
	return nil
}

// next reads opcodes up to the next key or function library.
func (r *Reader) next() (*Record, error) {
	s := r.src
	r.rec = Record{Key: r.rec.Key[:0]}
	for {
		op, err := s.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case opAux:
			if err := s.skipString(); err != nil {
				return nil, err
			}
			err = s.skipString()
		case opResizeDB:
			err = s.skipCounts(2)
		case opSlotInfo:
			err = s.skipCounts(3) // slot, its keys, its keys with a TTL
		case opSelectDB:
			var db int64
			if db, err = s.count(); err == nil && db != 0 {
				return nil, fmt.Errorf("%w: database %d: a cluster-mode node has only database 0; restore this RDB into a non-cluster Redis instead", ErrUnsupported, db)
			}
		case opExpireTime:
			var p []byte
			if p, err = s.next(4); err == nil {
				r.rec.ExpireAtMs = int64(binary.LittleEndian.Uint32(p)) * 1000
			}
		case opExpireTimeMs:
			var p []byte
			if p, err = s.next(8); err == nil {
				r.rec.ExpireAtMs = int64(binary.LittleEndian.Uint64(p))
			}
		case opIdle:
			_, err = s.count()
		case opFreq:
			_, err = s.byte()
		case opModuleAux:
			return nil, fmt.Errorf("%w: module auxiliary data: modules are not supported", ErrUnsupported)
		case opFunctionPreGA:
			return nil, fmt.Errorf("%w: a function library in the format of Redis 7.0's release candidates", ErrUnsupported)
		case opFunction2:
			r.rec.Kind = KindFunction
			r.code, err = s.readString(r.code[:0], "function library")
			r.rec.Payload = r.code
			if err != nil {
				return nil, err
			}
			return &r.rec, nil
		case opEOF:
			return nil, r.end()
		default:
			return r.keyValue(op)
		}
		if err != nil {
			return nil, err
		}
	}
}

// keyValue reads a key and its value of type t, and builds the DUMP payload: the type, the
// value as serialized, the RDB version (2 bytes) and the CRC-64 of all that (8 bytes), all
// little-endian.
func (r *Reader) keyValue(t byte) (*Record, error) {
	s := r.src
	var err error
	if r.rec.Key, err = s.readString(r.rec.Key, "key"); err != nil {
		return nil, err
	}
	// The record holds the key and the payload: the type and value (rec), then 10 bytes of
	// version and checksum.
	s.base = int64(len(r.rec.Key)) + trailerLen
	s.rec = append(s.rec[:0], t)
	s.recording = true
	err = s.skipValue(t)
	s.recording = false
	if err != nil {
		return nil, fmt.Errorf("in the value of key %s: %w", quoteKey(r.rec.Key), err)
	}
	s.rec = binary.LittleEndian.AppendUint16(s.rec, uint16(r.version))
	if r.unsealed {
		s.rec = binary.LittleEndian.AppendUint64(s.rec, 0)
	} else {
		s.rec = binary.LittleEndian.AppendUint64(s.rec, rdbstream.CRC64(0, s.rec))
	}
	r.rec.Kind, r.rec.Payload, r.rec.Slot = KindKey, s.rec, KeySlot(r.rec.Key)
	return &r.rec, nil
}

// seal writes the CRC-64 into the trailer of a key's payload that an unsealed Reader
// returned, making it a DUMP payload RESTORE accepts.
func seal(payload []byte) {
	body := len(payload) - 8
	binary.LittleEndian.PutUint64(payload[body:], rdbstream.CRC64(0, payload[:body]))
}

// end checks the checksum after the EOF opcode.
func (r *Reader) end() error {
	sum := r.src.sum()
	p, err := r.src.next(8)
	if err != nil {
		return fmt.Errorf("%w: the checksum after the EOF opcode: %w", ErrCorrupt, err)
	}
	stored := binary.LittleEndian.Uint64(p)
	if stored != 0 && stored != sum {
		return fmt.Errorf("%w: CRC-64 %016x, but the RDB says %016x: the data read was damaged", ErrCorrupt, sum, stored)
	}
	if err := r.src.atEnd(); err != nil {
		return err
	}
	r.done, r.checksummed = true, stored != 0
	return io.EOF
}

// quoteKey quotes a key for an error or a log, cut after its first maxQuotedKey bytes: a
// key is the tenant's data, and may be megabytes long.
func quoteKey(key []byte) string {
	if len(key) <= maxQuotedKey {
		return strconv.Quote(string(key))
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:maxQuotedKey], len(key))
}

// maxQuotedKey is the longest part of a key an error quotes.
const maxQuotedKey = 128
