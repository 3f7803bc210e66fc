package redisarchive

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// FormatVersion is the version of the segment format this package writes and reads.
const FormatVersion = 1

// segmentMagic opens every segment object.
const segmentMagic = "REDIS-ARCHIVE-SEGMENT\n"

// recordHeaderLen is the fixed part of a record: receive time, offset, length.
const recordHeaderLen = 8 + 8 + 4

// maxManifestLen bounds the manifest line a reader accepts.
const maxManifestLen = 64 << 10

// ErrCorrupt is a segment whose bytes are not what its manifest says.
var ErrCorrupt = errors.New("corrupt archive segment")

// Segment is a segment's manifest: which stretch of which shard's replication history it
// holds. It is the segment object's second line (JSON), before the records.
type Segment struct {
	// Format is FormatVersion.
	Format int `json:"format"`
	// Cluster and Shard name the shard whose master sent the commands.
	Cluster string `json:"cluster"`
	Shard   string `json:"shard"`
	// Timeline counts the archive's unbroken histories: it starts at 1 and goes up by one each
	// time the follower had to start from a new base (a gap).
	Timeline int `json:"timeline"`
	// ReplID is the replication ID of the master that sent the commands, as it said it (its
	// +CONTINUE): after a failover it is the new master's, and the offsets go on.
	ReplID string `json:"replid"`
	// Start and End are replication offsets: the segment holds the stream's bytes after
	// Start up to and including End (Start is the previous segment's End). Bytes the
	// archive need not keep (PING, REPLCONF) count in the range but are not stored.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// FirstTime and LastTime are the receive times of the first and last stored commands,
	// in Unix milliseconds.
	FirstTime int64 `json:"firstTime"`
	LastTime  int64 `json:"lastTime"`
	// Commands is the number of stored commands.
	Commands int `json:"commands"`
	// Bytes and SHA256 (lower-case hex) describe the records that follow the manifest.
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// First and Last are FirstTime and LastTime as times.
func (s Segment) First() time.Time { return time.UnixMilli(s.FirstTime).UTC() }

// Last is LastTime as a time.
func (s Segment) Last() time.Time { return time.UnixMilli(s.LastTime).UTC() }

// Record is one command of a segment.
type Record struct {
	// Time is when the follower received the command, in Unix milliseconds.
	Time int64
	// Offset is the replication offset just after the command: the master's
	// master_repl_offset once it had propagated it.
	Offset int64
	// Command is the command's RESP bytes exactly as the master sent them.
	Command []byte
}

// appendRecord appends a record in the segment framing: the receive time (Unix ms) and
// the offset after the command as 8-byte big-endian integers, the command's length as a
// 4-byte big-endian integer, then the command.
func appendRecord(dst []byte, timeMs, offset int64, command []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(timeMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(command)))
	return append(dst, command...)
}

// EncodeSegment writes a segment object: the magic line, the manifest (its Bytes and SHA256
// filled in from body) on one line, then body, the records.
func EncodeSegment(m Segment, body []byte) ([]byte, Segment, error) {
	head, m, err := segmentHeader(m, body)
	if err != nil {
		return nil, m, err
	}
	return append(head, body...), m, nil
}

// segmentHeader returns the magic and manifest lines of a segment whose records are body,
// and the manifest with Format, Bytes and SHA256 filled in.
func segmentHeader(m Segment, body []byte) ([]byte, Segment, error) {
	sum := sha256.Sum256(body)
	m.Format, m.Bytes, m.SHA256 = FormatVersion, int64(len(body)), hex.EncodeToString(sum[:])
	js, err := json.Marshal(m)
	if err != nil {
		return nil, m, err
	}
	head := make([]byte, 0, len(segmentMagic)+len(js)+1)
	return append(append(append(head, segmentMagic...), js...), '\n'), m, nil
}

// DecodeSegment checks a segment object (magic, manifest, the records' length and SHA-256,
// every record's framing and that its offsets rise within Start..End) and returns its
// manifest and records. The records' Command slices point into data.
func DecodeSegment(data []byte) (Segment, []Record, error) {
	var m Segment
	rest, ok := bytes.CutPrefix(data, []byte(segmentMagic))
	if !ok {
		return m, nil, fmt.Errorf("%w: no segment header", ErrCorrupt)
	}
	line, _, ok := bytes.Cut(rest[:min(len(rest), maxManifestLen)], []byte("\n"))
	if !ok {
		return m, nil, fmt.Errorf("%w: no manifest line", ErrCorrupt)
	}
	body := rest[len(line)+1:]
	if err := json.Unmarshal(line, &m); err != nil {
		return m, nil, fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	if m.Format != FormatVersion {
		return m, nil, fmt.Errorf("%w: format %d, this code reads %d", ErrCorrupt, m.Format, FormatVersion)
	}
	sum := sha256.Sum256(body)
	if int64(len(body)) != m.Bytes || hex.EncodeToString(sum[:]) != m.SHA256 {
		return m, nil, fmt.Errorf("%w: the records are %d bytes with SHA-256 %x; the manifest says %d bytes, %s",
			ErrCorrupt, len(body), sum, m.Bytes, m.SHA256)
	}
	records := make([]Record, 0, m.Commands)
	prev := m.Start
	for len(body) > 0 {
		if len(body) < recordHeaderLen {
			return m, nil, fmt.Errorf("%w: a record cut short", ErrCorrupt)
		}
		r := Record{Time: int64(binary.BigEndian.Uint64(body)), Offset: int64(binary.BigEndian.Uint64(body[8:]))}
		n := int(binary.BigEndian.Uint32(body[16:]))
		if len(body) < recordHeaderLen+n || r.Offset < prev+int64(n) || r.Offset > m.End {
			return m, nil, fmt.Errorf("%w: record %d (offset %d, %d bytes) does not fit after offset %d in %d..%d",
				ErrCorrupt, len(records), r.Offset, n, prev, m.Start, m.End)
		}
		r.Command, body, prev = body[recordHeaderLen:recordHeaderLen+n], body[recordHeaderLen+n:], r.Offset
		records = append(records, r)
	}
	if len(records) != m.Commands {
		return m, nil, fmt.Errorf("%w: %d records, the manifest says %d", ErrCorrupt, len(records), m.Commands)
	}
	return m, records, nil
}
