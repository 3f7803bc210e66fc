package rdbstream

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
)

// RDB opcodes that come before the first key (src/rdb.h).
const (
	opFunction2 = 0xF5 // a function library: one string
	opModuleAux = 0xF7 // a module's data, readable only by the module
	opAux       = 0xFA // an aux field: two strings
	opResizeDB  = 0xFB // the database's key count and keys-with-TTL count
	opSelectDB  = 0xFE // the database number of the keys that follow
)

// preamble is what an RDB says of itself before its first key: its aux fields (redis-ver,
// ctime, repl-id...; the first maxAuxFields of them) and, from the RESIZEDB opcode, the number of keys of database 0 and how
// many of them have a TTL, as the node counted them when it wrote the snapshot.
type preamble struct {
	aux           map[string]string
	keys, expires int64 // -1: not known
}

// readPreamble reads r, just after the header, up to the first key. It never fails: what an
// RDB it cannot follow (a module's aux data, another database first) leaves unknown stays
// so, and the checks of the whole payload are the checker's.
func readPreamble(r *bufio.Reader) preamble {
	p := preamble{aux: map[string]string{}, keys: -1, expires: -1}
	db := int64(-1)
	for {
		op, err := r.ReadByte()
		if err != nil {
			return p
		}
		switch op {
		case opAux:
			key, err := readString(r)
			if err != nil {
				return p
			}
			value, err := readString(r)
			if err != nil {
				return p
			}
			if len(p.aux) < maxAuxFields {
				p.aux[key] = value
			}
		case opFunction2:
			if _, err := readString(r); err != nil {
				return p
			}
		case opSelectDB:
			if db, _, err = ReadLength(r); err != nil {
				return p
			}
		case opResizeDB:
			keys, _, err := ReadLength(r)
			if err != nil {
				return p
			}
			expires, _, err := ReadLength(r)
			if err == nil && db == 0 {
				p.keys, p.expires = keys, expires
			}
			return p
		case opEOF:
			// Empty databases are not written at all: no keys.
			p.keys, p.expires = 0, 0
			return p
		default:
			// A key already (RESIZEDB is optional), module data, or something newer.
			return p
		}
	}
}

// ReadLength reads an RDB length (src/rdb.c rdbLoadLenByRef): 6 bits, 14 bits, or 32 or 64
// bits big-endian after a marker byte. encoded is true for the encoded-string form, whose
// value is then the encoding (0-2: an 8-, 16- or 32-bit integer, 3: LZF). A length byte of
// no known form is ErrInvalid.
func ReadLength(r io.ByteReader) (n int64, encoded bool, err error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, false, err
	}
	var size int
	switch {
	case b>>6 == 0:
		return int64(b & 0x3F), false, nil
	case b>>6 == 1:
		next, err := r.ReadByte()
		return int64(b&0x3F)<<8 | int64(next), false, err
	case b>>6 == 3:
		return int64(b & 0x3F), true, nil
	case b == 0x80:
		size = 4
	case b == 0x81:
		size = 8
	default:
		return 0, false, fmt.Errorf("%w: length byte 0x%02x", ErrInvalid, b)
	}
	var v uint64
	for range size {
		next, err := r.ReadByte()
		if err != nil {
			return 0, false, err
		}
		v = v<<8 | uint64(next)
	}
	if v > math.MaxInt64 {
		return 0, false, fmt.Errorf("%w: a length of %d", ErrInvalid, v)
	}
	return int64(v), false, nil
}

// maxAuxFields bounds the aux fields readPreamble keeps: Redis writes about a dozen, and a
// payload with millions of them must not make a map of them.
const maxAuxFields = 64

// maxAuxString bounds a string readPreamble keeps; longer ones (function libraries) are
// skipped.
const maxAuxString = 4096

// readString reads an RDB string: raw, an encoded integer, or LZF-compressed (skipped: the
// aux fields readPreamble keeps are never compressed, being short).
func readString(r *bufio.Reader) (string, error) {
	n, special, err := ReadLength(r)
	if err != nil {
		return "", err
	}
	if special {
		var buf [4]byte
		switch n {
		case 0:
			b, err := r.ReadByte()
			return strconv.Itoa(int(int8(b))), err
		case 1:
			_, err := io.ReadFull(r, buf[:2])
			return strconv.Itoa(int(int16(binary.LittleEndian.Uint16(buf[:2])))), err
		case 2:
			_, err := io.ReadFull(r, buf[:4])
			return strconv.Itoa(int(int32(binary.LittleEndian.Uint32(buf[:4])))), err
		case 3:
			compressed, _, err := ReadLength(r)
			if err != nil {
				return "", err
			}
			if _, _, err := ReadLength(r); err != nil { // the uncompressed length
				return "", err
			}
			_, err = r.Discard(int(compressed))
			return "", err
		}
		return "", fmt.Errorf("%w: string encoding %d", ErrInvalid, n)
	}
	if n > maxAuxString {
		_, err := r.Discard(int(n))
		return "", err
	}
	buf := make([]byte, n)
	_, err = io.ReadFull(r, buf)
	return string(buf), err
}
