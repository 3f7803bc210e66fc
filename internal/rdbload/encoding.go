package rdbload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// length reads an RDB length (rdbstream.ReadLength); encoded is true for the
// encoded-string form, whose value is then the encoding (encInt8...encLZF).
func (s *source) length() (n int64, encoded bool, err error) {
	n, encoded, err = rdbstream.ReadLength(s)
	if err != nil && errors.Is(err, rdbstream.ErrInvalid) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return n, encoded, err
}

// count reads a length that must not be the encoded-string form: an element count.
func (s *source) count() (int64, error) {
	n, special, err := s.length()
	if err == nil && special {
		err = fmt.Errorf("%w: an encoded string where a count was expected", ErrCorrupt)
	}
	if err == nil && n > maxCount {
		err = fmt.Errorf("%w: a count of %d", ErrCorrupt, n)
	}
	return n, err
}

// maxCount bounds an element count: a larger one is taken for corruption.
const maxCount = 1 << 48

// String encodings (src/rdb.h RDB_ENC_*).
const (
	encInt8  = 0
	encInt16 = 1
	encInt32 = 2
	encLZF   = 3
)

// skipString consumes an RDB string of any encoding.
func (s *source) skipString() error {
	n, special, err := s.length()
	if err != nil {
		return err
	}
	if !special {
		return s.skip(n)
	}
	switch n {
	case encInt8:
		return s.skip(1)
	case encInt16:
		return s.skip(2)
	case encInt32:
		return s.skip(4)
	case encLZF:
		compressed, _, err := s.lzfLengths()
		if err != nil {
			return err
		}
		return s.skip(compressed)
	}
	return fmt.Errorf("%w: string encoding %d", ErrCorrupt, n)
}

// lzfLengths reads the compressed and uncompressed lengths of an LZF string and checks them
// against each other: LZF never expands more than lzfMaxRatio times, and no Redis string is
// longer than maxString.
func (s *source) lzfLengths() (compressed, size int64, err error) {
	if compressed, err = s.count(); err != nil {
		return 0, 0, err
	}
	if size, err = s.count(); err != nil {
		return 0, 0, err
	}
	switch {
	case size > maxString:
		return 0, 0, fmt.Errorf("%w: an LZF string claims %d bytes uncompressed, more than Redis's largest string (%s)", ErrCorrupt, size, sizeText(maxString))
	case size > compressed*lzfMaxRatio:
		return 0, 0, fmt.Errorf("%w: an LZF string claims %d bytes from %d compressed, more than LZF can expand (%dx): a compression bomb", ErrCorrupt, size, compressed, lzfMaxRatio)
	}
	return compressed, size, nil
}

// readString consumes an RDB string and appends its bytes to dst: integers in decimal,
// LZF-compressed strings decompressed. what names the string in errors ("key"). The
// string's length is admitted against the record's limit (with dst's) before it is read.
func (s *source) readString(dst []byte, what string) ([]byte, error) {
	n, special, err := s.length()
	if err != nil {
		return dst, err
	}
	if !special {
		if err := s.admitString(dst, n, what); err != nil {
			return dst, err
		}
		return s.appendN(dst, n)
	}
	switch n {
	case encInt8:
		b, err := s.byte()
		return strconv.AppendInt(dst, int64(int8(b)), 10), err
	case encInt16:
		p, err := s.next(2)
		if err != nil {
			return dst, err
		}
		return strconv.AppendInt(dst, int64(int16(binary.LittleEndian.Uint16(p))), 10), nil
	case encInt32:
		p, err := s.next(4)
		if err != nil {
			return dst, err
		}
		return strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(p))), 10), nil
	case encLZF:
		compressed, size, err := s.lzfLengths()
		if err != nil {
			return dst, err
		}
		if err := s.admitString(dst, size, what); err != nil {
			return dst, err
		}
		var p []byte
		if compressed <= int64(len(s.buf)) {
			p, err = s.next(compressed)
		} else {
			s.scratch, err = s.appendN(s.scratch[:0], compressed)
			p = s.scratch
		}
		if err != nil {
			return dst, err
		}
		return lzfDecompress(dst, p, int(size))
	}
	return dst, fmt.Errorf("%w: string encoding %d", ErrCorrupt, n)
}

// admitString admits a string of n bytes appended to dst.
func (s *source) admitString(dst []byte, n int64, what string) error {
	if n > s.maxRecord {
		return fmt.Errorf("%w: %s length claim %d exceeds the %s limit of a record", ErrTooLarge, what, n, sizeText(s.maxRecord))
	}
	if total := int64(len(dst)) + n; total > s.cheap {
		return s.admit(total, what)
	}
	return nil
}
