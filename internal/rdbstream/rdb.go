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

// jonesSlices are the tables of CRC64's sixteen-bytes-at-a-time loop, built once:
// jonesSlices[0] is jones, and jonesSlices[k][b] the CRC of byte b followed by k zero
// bytes. (hash/crc64 goes eight bytes at a time, and for a table of its own builds the
// eight tables on every call of 2 KiB or more and compares 2 KiB of table on every call of
// 64 bytes or more.)
var jonesSlices = func() *[16][256]uint64 {
	var t [16][256]uint64
	t[0] = *jones
	for b := range 256 {
		crc := t[0][b]
		for k := 1; k < 16; k++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[k][b] = crc
		}
	}
	return &t
}()

// CRC64 continues a Redis CRC-64 (Jones) over p, from crc (0 to start): the checksum that
// ends an RDB file and a DUMP payload. Redis's CRC has no inversion on the way in or out.
func CRC64(crc uint64, p []byte) uint64 {
	t := jonesSlices
	for len(p) >= 16 {
		a := crc ^ binary.LittleEndian.Uint64(p)
		b := binary.LittleEndian.Uint64(p[8:])
		crc = t[15][a&0xff] ^ t[14][a>>8&0xff] ^ t[13][a>>16&0xff] ^ t[12][a>>24&0xff] ^
			t[11][a>>32&0xff] ^ t[10][a>>40&0xff] ^ t[9][a>>48&0xff] ^ t[8][a>>56] ^
			t[7][b&0xff] ^ t[6][b>>8&0xff] ^ t[5][b>>16&0xff] ^ t[4][b>>24&0xff] ^
			t[3][b>>32&0xff] ^ t[2][b>>40&0xff] ^ t[1][b>>48&0xff] ^ t[0][b>>56]
		p = p[16:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
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
// four digits. A version before the checksum's (Redis 2.6), or fewer than HeaderLen bytes,
// is refused.
func ParseHeader(head []byte) (int, error) {
	if len(head) < HeaderLen {
		return 0, fmt.Errorf("%w: a header of %d bytes, not %d", ErrInvalid, len(head), HeaderLen)
	}
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
