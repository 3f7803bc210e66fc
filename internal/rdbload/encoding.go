package rdbload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// maxBlob bounds any one string of an RDB (Redis's own limit, proto-max-bulk-len, is 512 MB
// by default): a larger length is taken for corruption.
const maxBlob = 1 << 32

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
		compressed, err := s.count()
		if err != nil {
			return err
		}
		if _, err := s.count(); err != nil { // the uncompressed length
			return err
		}
		return s.skip(compressed)
	}
	return fmt.Errorf("%w: string encoding %d", ErrCorrupt, n)
}

// readString consumes an RDB string and appends its bytes to dst: integers in decimal,
// LZF-compressed strings decompressed.
func (s *source) readString(dst []byte) ([]byte, error) {
	n, special, err := s.length()
	if err != nil {
		return dst, err
	}
	if !special {
		p, err := s.next(n)
		return append(dst, p...), err
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
		compressed, err := s.count()
		if err != nil {
			return dst, err
		}
		size, err := s.count()
		if err != nil {
			return dst, err
		}
		if size > maxBlob {
			return dst, fmt.Errorf("%w: an LZF string of %d bytes", ErrCorrupt, size)
		}
		p, err := s.next(compressed)
		if err != nil {
			return dst, err
		}
		return lzfDecompress(dst, p, int(size))
	}
	return dst, fmt.Errorf("%w: string encoding %d", ErrCorrupt, n)
}
