package rdbstream

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"strconv"
)

// RDB framing: "REDIS" and four version digits open the file; the EOF opcode and, from
// version 5 on, an 8-byte little-endian CRC-64 of everything before it close it.
// HeaderLen is the length of an RDB's header.
const HeaderLen = 9

const (
	opEOF       = 0xFF
	checksumLen = 8
	// minRDBLen is an empty database: header, EOF opcode, checksum.
	minRDBLen = HeaderLen + 1 + checksumLen
	// minVersion is the first RDB version with the checksum (Redis 2.6).
	minVersion = 5
)

// jones is the table of the CRC-64 Redis uses (Jones polynomial 0xad93d23594c935a9,
// reflected, no initial or final inversion), in the reversed bit order hash/crc64 takes.
var jones = crc64.MakeTable(0x95ac9329ac4bc9b5)

// CRC64 continues a Redis CRC-64 (Jones) over p, from crc (0 to start): the checksum that
// ends an RDB file and a DUMP payload. hash/crc64 inverts the value on the way in and out;
// Redis's has no inversion, so both are undone.
func CRC64(crc uint64, p []byte) uint64 {
	return ^crc64.Update(^crc, jones, p)
}

// checker checks an RDB as it passes to w, counts it and hashes it. The CRC covers every
// byte but the last eight, which are held apart until the next write shows they are not the
// last.
type checker struct {
	w        io.Writer
	sha      hash.Hash
	n        int64
	version  int
	crc      uint64
	pending  [checksumLen]byte // the last bytes written, not yet in crc
	pendingN int
	lastFed  byte // the last byte added to crc: the EOF opcode once the RDB is whole
}

func newChecker(w io.Writer) *checker {
	return &checker{w: w, sha: sha256.New()}
}

// header checks the magic and version at the front of r without consuming them.
func (c *checker) header(r *bufio.Reader) error {
	head, err := r.Peek(HeaderLen)
	if err != nil {
		return fmt.Errorf("%w: the payload ended within its %d-byte header (%d bytes): %w", ErrInvalid, HeaderLen, len(head), err)
	}
	version, err := ParseHeader(head)
	if err != nil {
		return err
	}
	c.version = version
	return nil
}

// ParseHeader returns the version of an RDB header, its first HeaderLen bytes: "REDIS" and
// four digits. A version before the checksum's (Redis 2.6) is refused.
func ParseHeader(head []byte) (int, error) {
	if string(head[:5]) != "REDIS" {
		return 0, fmt.Errorf("%w: it starts with %q, not REDIS", ErrInvalid, head)
	}
	version, err := strconv.Atoi(string(head[5:HeaderLen]))
	if err != nil || version < 0 {
		return 0, fmt.Errorf("%w: version %q is not a number", ErrInvalid, head[5:HeaderLen])
	}
	if version < minVersion {
		return 0, fmt.Errorf("%w: version %d is older than Redis 2.6's, without a checksum", ErrInvalid, version)
	}
	return version, nil
}

func (c *checker) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		return n, fmt.Errorf("while writing the RDB: %w", err)
	}
	if n != len(p) {
		return n, fmt.Errorf("while writing the RDB: %w", io.ErrShortWrite)
	}
	c.sha.Write(p)
	c.n += int64(n)
	if total := c.pendingN + len(p); total <= checksumLen {
		c.pendingN += copy(c.pending[c.pendingN:], p)
		return n, nil
	}
	// Everything but the last eight bytes of pending+p goes into the CRC.
	feed := c.pendingN + len(p) - checksumLen
	fromPending := min(c.pendingN, feed)
	c.feed(c.pending[:fromPending])
	kept := copy(c.pending[:], c.pending[fromPending:c.pendingN])
	fromP := feed - fromPending
	c.feed(p[:fromP])
	c.pendingN = kept + copy(c.pending[kept:], p[fromP:])
	return n, nil
}

func (c *checker) feed(p []byte) {
	if len(p) > 0 {
		c.crc = CRC64(c.crc, p)
		c.lastFed = p[len(p)-1]
	}
}

// finish checks the end of the RDB, and reports whether it carried a checksum (a node with
// rdbchecksum no writes zeros).
func (c *checker) finish() (bool, error) {
	if c.n < minRDBLen {
		return false, fmt.Errorf("%w: %d bytes, fewer than the %d of an empty database", ErrInvalid, c.n, minRDBLen)
	}
	if c.lastFed != opEOF {
		return false, fmt.Errorf("%w: no EOF opcode before the checksum (byte 0x%02x): the snapshot was cut", ErrInvalid, c.lastFed)
	}
	stored := binary.LittleEndian.Uint64(c.pending[:])
	if stored == 0 {
		return false, nil
	}
	if stored != c.crc {
		return false, fmt.Errorf("%w: CRC-64 %016x, but the RDB says %016x", ErrInvalid, c.crc, stored)
	}
	return true, nil
}

func (c *checker) sum() string { return hex.EncodeToString(c.sha.Sum(nil)) }
