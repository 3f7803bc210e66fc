package redisarchive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// Sink is where segments go: the object store in production (StoreSink), memory or a
// directory in tests. Names are slash-separated (SegmentName).
type Sink interface {
	// Put stores data as the object name, replacing any.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the content of the object name.
	Get(ctx context.Context, name string) ([]byte, error)
	// List returns the names of the objects whose names start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// TimelinePrefix is the name prefix of a shard's segments of one timeline:
// <cluster>/archive/<shard>/<timeline, 8 digits>/.
func TimelinePrefix(cluster, shard string, timeline int) string {
	return fmt.Sprintf("%s/archive/%s/%08d/", cluster, shard, timeline)
}

// SegmentName is the name of the segment that starts at offset start:
// TimelinePrefix + <start, 20 digits>.seg, so that names sort as offsets do.
func SegmentName(cluster, shard string, timeline int, start int64) string {
	return fmt.Sprintf("%s%020d.seg", TimelinePrefix(cluster, shard, timeline), start)
}

// segmentStart reads the start offset out of a segment's name; false for other names.
func segmentStart(name string) (int64, bool) {
	base := name[strings.LastIndexByte(name, '/')+1:]
	digits, ok := strings.CutSuffix(base, ".seg")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// StoreSink keeps segments in the object store, under the Client's prefix (the backups'
// prefix: the archive sits beside the backups it continues).
type StoreSink struct {
	Client *objectstore.Client
	// Fence, when set, is asked before every write and deletion: an error (this operator
	// replica no longer leads) stops it, so a leader that stalled and woke up after another
	// took over does not overwrite the new leader's segments, which carry the same names
	// (a segment is named by its start offset, and the new leader resumes where the last
	// closed one ends).
	Fence func(context.Context) error
}

// ErrFenced wraps the Fence's error of a write or deletion the sink refused.
var ErrFenced = errors.New("the archive is written by another operator replica now")

// fenced asks the Fence, if any.
func (s StoreSink) fenced(ctx context.Context) error {
	if s.Fence == nil {
		return nil
	}
	if err := s.Fence(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return nil
}

// Put uploads data as name.
func (s StoreSink) Put(ctx context.Context, name string, data []byte) error {
	if err := s.fenced(ctx); err != nil {
		return err
	}
	_, err := s.Client.Put(ctx, name, bytes.NewReader(data), int64(len(data)))
	return err
}

// Check asks the Fence, if any, before a write that does not go through Put (a base's
// snapshot, streamed to the store).
func (s StoreSink) Check(ctx context.Context) error { return s.fenced(ctx) }

// Get downloads name, refusing an object larger than any segment can be (MaxObjectBytes):
// the store may be one a tenant controls (spec.restore.archive.source), and an object of
// any size read into memory would take the shared operator down.
func (s StoreSink) Get(ctx context.Context, name string) ([]byte, error) {
	buf := &cappedBuffer{max: MaxObjectBytes}
	_, err := s.Client.Get(ctx, name, buf, nil)
	return buf.Bytes(), err
}

// MaxObjectBytes is the largest archive object StoreSink.Get reads: a segment of
// DefaultSegmentBytes whose last command is as large as a command may be
// (DefaultMaxCommand), and its manifest line.
const MaxObjectBytes = DefaultSegmentBytes + DefaultMaxCommand + 1<<20

// ErrObjectTooLarge is StoreSink.Get's error for an object over MaxObjectBytes.
var ErrObjectTooLarge = errors.New("the archive object is larger than any segment can be")

// cappedBuffer is a bytes.Buffer that refuses to grow past max bytes.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("%w (over %d bytes)", ErrObjectTooLarge, b.max)
	}
	return b.Buffer.Write(p)
}

// List lists the names under prefix.
func (s StoreSink) List(ctx context.Context, prefix string) ([]string, error) {
	objects, err := s.Client.List(ctx, prefix)
	names := make([]string, len(objects))
	for i, o := range objects {
		names[i] = o.Name
	}
	return names, err
}

// Delete removes the object name.
func (s StoreSink) Delete(ctx context.Context, name string) error {
	if err := s.fenced(ctx); err != nil {
		return err
	}
	return s.Client.Delete(ctx, name)
}

// MemorySink keeps segments in memory, for tests. The zero value is ready to use.
type MemorySink struct {
	mu      sync.Mutex
	objects map[string][]byte
}

// Put stores a copy of data.
func (m *MemorySink) Put(_ context.Context, name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects == nil {
		m.objects = map[string][]byte{}
	}
	m.objects[name] = bytes.Clone(data)
	return nil
}

// Get returns the object's content; a missing object is an fs.ErrNotExist error.
func (m *MemorySink) Get(_ context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return data, nil
}

// List returns the sorted names under prefix.
func (m *MemorySink) List(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name := range m.objects {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Delete removes an object.
func (m *MemorySink) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, name)
	return nil
}

// DirSink keeps segments as files under a directory, names as relative paths.
type DirSink struct{ Dir string }

// Put writes data to a temporary file and renames it into place, so a reader never sees a
// partial segment.
func (d DirSink) Put(_ context.Context, name string, data []byte) error {
	path := filepath.Join(d.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// Get reads the file of name.
func (d DirSink) Get(_ context.Context, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.Dir, filepath.FromSlash(name)))
}

// List walks the directory for the names under prefix.
func (d DirSink) List(_ context.Context, prefix string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(d.Dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(d.Dir, path)
		if name := filepath.ToSlash(rel); err == nil && strings.HasPrefix(name, prefix) && !strings.HasSuffix(name, ".tmp") {
			names = append(names, name)
		}
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	slices.Sort(names)
	return names, err
}
