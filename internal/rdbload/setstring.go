package rdbload

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// maxSetLZF is the largest LZF-compressed string, uncompressed, that Load sends as SET: a
// larger one goes as RESTORE of its compressed payload, so that the loader never holds more
// than the record it admitted plus this.
const maxSetLZF = 64 << 10

// stringReader reads the strings of DUMP payloads (plainString), reused from key to key so
// that reading one allocates nothing.
type stringReader struct {
	r       bytes.Reader
	scratch []byte
}

// plainString returns the string a DUMP payload holds, for SET in place of RESTORE: a slice
// of payload for a string stored as is, else in the reader's scratch buffer (an integer's
// decimal text, an LZF string decompressed when at most maxSetLZF bytes), valid until the
// next call. ok is false for any other payload: another type, a larger LZF string, or one
// that does not parse (RESTORE then reports it as Redis sees it). SET of the string and
// RESTORE of the payload leave the same value, as Redis encodes a string from its bytes
// either way.
func (sr *stringReader) plainString(payload []byte) (value []byte, ok bool) {
	if len(payload) < 1+trailerLen || payload[0] != typeString {
		return nil, false
	}
	body := payload[1 : len(payload)-trailerLen]
	r, scratch := &sr.r, &sr.scratch
	r.Reset(body)
	n, encoded, err := rdbstream.ReadLength(r)
	if err != nil {
		return nil, false
	}
	rest := body[len(body)-r.Len():]
	if !encoded {
		if int64(len(rest)) != n {
			return nil, false
		}
		return rest, true
	}
	var i int64
	switch {
	case n == encInt8 && len(rest) == 1:
		i = int64(int8(rest[0]))
	case n == encInt16 && len(rest) == 2:
		i = int64(int16(binary.LittleEndian.Uint16(rest)))
	case n == encInt32 && len(rest) == 4:
		i = int64(int32(binary.LittleEndian.Uint32(rest)))
	case n == encLZF:
		return sr.lzfString(rest)
	default:
		return nil, false
	}
	*scratch = strconv.AppendInt((*scratch)[:0], i, 10)
	return *scratch, true
}

// lzfString decompresses the LZF string rest holds (its two lengths, then the block) into
// the scratch buffer, when it is at most maxSetLZF bytes.
func (sr *stringReader) lzfString(rest []byte) ([]byte, bool) {
	r, scratch := &sr.r, &sr.scratch
	r.Reset(rest)
	compressed, encoded, err := rdbstream.ReadLength(r)
	if err != nil || encoded {
		return nil, false
	}
	size, encoded, err := rdbstream.ReadLength(r)
	if err != nil || encoded || size > maxSetLZF || int64(r.Len()) != compressed {
		return nil, false
	}
	out, err := lzfDecompress((*scratch)[:0], rest[len(rest)-r.Len():], int(size))
	if err != nil || int64(len(out)) != size {
		return nil, false
	}
	*scratch = out
	return out, true
}
