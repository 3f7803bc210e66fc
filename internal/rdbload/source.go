package rdbload

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// sourceBuffer is the read buffer of a source: every read goes through it, larger strings a
// buffer at a time.
const sourceBuffer = 64 << 10

// source reads an RDB from an io.Reader through its own buffer, keeping the CRC-64 of every
// byte consumed (not of those read ahead), and, while recording, appends every byte consumed
// to rec: the serialized value that becomes a DUMP payload.
//
// The bytes a record holds (its key, and its payload or a function library's code) are
// admitted against maxRecord before they are taken in, and grow only as bytes arrive: a
// length claim larger than what follows in the input costs no more than those bytes.
type source struct {
	src    io.Reader
	buf    []byte
	r, w   int // buf[r:w] is read ahead, not consumed
	hashed int // buf[hashed:r] is consumed, not yet in crc
	crc    uint64
	n      int64 // bytes consumed

	recording bool
	rec       []byte
	base      int64  // bytes of the record held outside rec: its key
	scratch   []byte // an LZF string's compressed bytes, when more than buf holds

	// maxRecord bounds the bytes of one record; cheap is the size up to which a record
	// grows without a call to admit: min(smallRecord, maxRecord).
	maxRecord, cheap int64
	// gate, when set, admits one record larger than smallRecord at a time (bigRecords);
	// holding says this source has it. ctx bounds the wait for it.
	gate    chan struct{}
	holding bool
	ctx     context.Context
}

func newSource(r io.Reader) *source {
	s := &source{src: r, buf: make([]byte, sourceBuffer), ctx: context.Background()}
	s.setMaxRecord(DefaultMaxRecord)
	return s
}

func (s *source) setMaxRecord(n int64) {
	s.maxRecord, s.cheap = n, min(n, smallRecord)
}

// sum returns the CRC-64 of every byte consumed so far.
func (s *source) sum() uint64 {
	s.crc = rdbstream.CRC64(s.crc, s.buf[s.hashed:s.r])
	s.hashed = s.r
	return s.crc
}

// fill reads more into buf until it holds at least want unconsumed bytes (want <= len(buf)).
func (s *source) fill(want int) error {
	if s.r > 0 {
		s.sum()
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r, s.hashed = 0, 0
	}
	for s.w < want {
		n, err := s.src.Read(s.buf[s.w:])
		s.w += n
		if s.w >= want {
			return nil
		}
		if err != nil {
			return unexpected(err)
		}
	}
	return nil
}

// unexpected turns the end of the input within an RDB into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: truncated: the input ended early: %w", ErrCorrupt, io.ErrUnexpectedEOF)
	}
	return err
}

// ReadByte consumes one byte (io.ByteReader, for rdbstream.ReadLength).
func (s *source) ReadByte() (byte, error) { return s.byte() }

// byte consumes one byte.
func (s *source) byte() (byte, error) {
	if s.r == s.w {
		if err := s.fill(1); err != nil {
			return 0, err
		}
	}
	if s.recording && s.base+int64(len(s.rec))+1 > s.cheap {
		if err := s.admit(s.base+int64(len(s.rec))+1, "the value"); err != nil {
			return 0, err
		}
	}
	b := s.buf[s.r]
	s.r++
	s.n++
	if s.recording {
		if len(s.rec) == cap(s.rec) {
			s.grow(1)
		}
		s.rec = append(s.rec, b)
	}
	return b, nil
}

// next consumes n bytes, at most len(buf), and returns them; the slice is valid until the
// next call.
func (s *source) next(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(s.buf)) {
		return nil, fmt.Errorf("rdbload: a read of %d bytes, more than the buffer's %d", n, len(s.buf)) // a bug, not an input error
	}
	if avail := s.w - s.r; avail < int(n) {
		if err := s.fill(int(n)); err != nil {
			return nil, err
		}
	}
	if s.recording && s.base+int64(len(s.rec))+n > s.cheap {
		if err := s.admit(s.base+int64(len(s.rec))+n, "the value"); err != nil {
			return nil, err
		}
	}
	p := s.buf[s.r : s.r+int(n)]
	s.r += int(n)
	s.n += n
	if s.recording {
		if len(s.rec)+len(p) > cap(s.rec) {
			s.grow(len(p))
		}
		s.rec = append(s.rec, p...)
	}
	return p, nil
}

// grow makes room in rec for n more bytes, admitted already: it doubles rec, but never past
// what the record's limit leaves for its payload, so that a record near the limit holds at
// most the limit and the buffer it grew from (append would grow past the limit, and by
// steps of a quarter, each one a copy).
func (s *source) grow(n int) {
	most := s.maxRecord - s.base + trailerLen
	c := max(min(2*int64(cap(s.rec)), most), int64(len(s.rec)+n), 512)
	rec := make([]byte, len(s.rec), c)
	copy(rec, s.rec)
	s.rec = rec
}

// trailerLen is what follows a value in its DUMP payload: the RDB version (2 bytes) and the
// CRC-64 (8 bytes).
const trailerLen = 10

// appendN consumes n bytes and appends them to dst a buffer at a time, so that dst grows
// with the bytes that arrive, not with n: a claim beyond the input's end fails there. The
// caller has admitted len(dst)+n.
func (s *source) appendN(dst []byte, n int64) ([]byte, error) {
	for n > 0 {
		step := min(n, int64(len(s.buf)))
		p, err := s.next(step)
		if err != nil {
			return dst, err
		}
		dst = append(dst, p...)
		n -= step
	}
	return dst, nil
}

// atEnd reads the input to its end and fails if anything is left: bytes after the RDB, or
// the input's own error (an object store's failed checksum, passed on through a pipe).
func (s *source) atEnd() error {
	for {
		if s.w > s.r {
			return fmt.Errorf("%w: bytes after the RDB's end", ErrCorrupt) // how many depends on how the input was read
		}
		n, err := s.src.Read(s.buf[:cap(s.buf)])
		s.r, s.w, s.hashed = 0, n, 0
		if s.w > 0 {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("after the RDB's end: %w", err)
		}
	}
}

// skip consumes n bytes without returning them (but recording them while recording). A
// recorded claim is admitted first, so that a length the record could not hold fails at
// once, naming it.
func (s *source) skip(n int64) error {
	if s.recording && n > 0 {
		if err := s.claim(n); err != nil {
			return err
		}
	}
	for n > 0 {
		step := min(n, int64(len(s.buf)))
		if _, err := s.next(step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// claim checks a length claim of n bytes within the value being recorded against the
// record's limit, before any of them is read.
func (s *source) claim(n int64) error {
	if total := s.base + int64(len(s.rec)) + n; n > s.maxRecord || total > s.maxRecord {
		return fmt.Errorf("%w: a length claim of %d bytes in the value exceeds the %s limit of a record", ErrTooLarge, n, sizeText(s.maxRecord))
	}
	return nil
}

// admit lets the record grow to total bytes: past maxRecord it is ErrTooLarge; past
// smallRecord, with a gate, it first waits for the process's one large record (bigRecords).
func (s *source) admit(total int64, what string) error {
	if total > s.maxRecord {
		return fmt.Errorf("%w: %s would take the record to %d bytes, over the %s limit", ErrTooLarge, what, total, sizeText(s.maxRecord))
	}
	if total <= smallRecord || s.gate == nil || s.holding {
		return nil
	}
	select {
	case s.gate <- struct{}{}:
		s.holding = true
		return nil
	case <-s.ctx.Done():
		return fmt.Errorf("while waiting for another load's large record to pass: %w", context.Cause(s.ctx))
	}
}

// release drops the buffers of a large record and lets the next large record in: called
// once the record is no longer used (the next call to Next, the end, an error).
func (s *source) release() {
	if cap(s.rec) > smallRecord {
		s.rec = nil
	}
	if cap(s.scratch) > smallRecord {
		s.scratch = nil
	}
	if s.holding {
		s.holding = false
		<-s.gate
	}
}

// sizeText writes n as MiB when it is a whole number of them, else as bytes.
func sizeText(n int64) string {
	if n > 0 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d-byte", n)
}
