package rdbload

import (
	"errors"
	"fmt"
	"io"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// sourceBuffer is the read buffer of a source: values larger than it are read straight into
// the record.
const sourceBuffer = 64 << 10

// source reads an RDB from an io.Reader through its own buffer, keeping the CRC-64 of every
// byte consumed (not of those read ahead), and, while recording, appends every byte consumed
// to rec: the serialized value that becomes a DUMP payload.
type source struct {
	src    io.Reader
	buf    []byte
	r, w   int // buf[r:w] is read ahead, not consumed
	hashed int // buf[hashed:r] is consumed, not yet in crc
	crc    uint64
	n      int64 // bytes consumed

	recording bool
	rec       []byte
	scratch   []byte // for reads larger than buf
}

func newSource(r io.Reader) *source {
	return &source{src: r, buf: make([]byte, sourceBuffer)}
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
		return fmt.Errorf("%w: the input ended early: %w", ErrCorrupt, io.ErrUnexpectedEOF)
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
	b := s.buf[s.r]
	s.r++
	s.n++
	if s.recording {
		s.rec = append(s.rec, b)
	}
	return b, nil
}

// next consumes n bytes and returns them; the slice is valid until the next call.
func (s *source) next(n int64) ([]byte, error) {
	if n < 0 || n > maxBlob {
		return nil, fmt.Errorf("%w: a string of %d bytes", ErrCorrupt, n)
	}
	if n > int64(len(s.buf)) {
		return s.large(int(n))
	}
	if avail := s.w - s.r; avail < int(n) {
		if err := s.fill(int(n)); err != nil {
			return nil, err
		}
	}
	p := s.buf[s.r : s.r+int(n)]
	s.r += int(n)
	s.n += n
	if s.recording {
		s.rec = append(s.rec, p...)
	}
	return p, nil
}

// large consumes n bytes, more than buf holds, into the scratch buffer: what buf has read
// ahead, then the rest straight from the input, a chunk at a time, so that a corrupted
// length fails at the input's end rather than allocating what it claims. Values, which are
// recorded, are read through skip in buffer-sized steps instead; only keys and function
// code come here.
func (s *source) large(n int) ([]byte, error) {
	if s.recording {
		return nil, errors.New("rdbload: a large read while recording") // a bug, not an input error
	}
	s.r, s.scratch = s.w, append(s.scratch[:0], s.buf[s.r:s.w]...)
	s.n += int64(len(s.scratch))
	s.sum()
	s.r, s.w, s.hashed = 0, 0, 0
	for len(s.scratch) < n {
		at := len(s.scratch)
		s.scratch = append(s.scratch, make([]byte, min(n-at, largeChunk))...)
		m, err := io.ReadFull(s.src, s.scratch[at:])
		s.crc = rdbstream.CRC64(s.crc, s.scratch[at:at+m])
		s.n += int64(m)
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return s.scratch, nil
}

// largeChunk is the step by which large grows its destination.
const largeChunk = 1 << 20

// atEnd reads the input to its end and fails if anything is left: bytes after the RDB, or
// the input's own error (an object store's failed checksum, passed on through a pipe).
func (s *source) atEnd() error {
	for {
		if s.w > s.r {
			return fmt.Errorf("%w: %d or more bytes after the RDB's end", ErrCorrupt, s.w-s.r)
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

// skip consumes n bytes without returning them.
func (s *source) skip(n int64) error {
	for n > 0 {
		step := min(n, int64(len(s.buf)))
		if _, err := s.next(step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}
