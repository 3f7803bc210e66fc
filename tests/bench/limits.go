package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// limitBytes is how much the loopback and disk limits move.
const limitBytes = 512 << 20

// measureLimits measures the ceilings a backup's transfer meets on this machine: a TCP copy
// over loopback, a file written and fsynced in the cluster's directory, and three objects of
// a shard's size (130 bytes a key) put into the store side by side, from memory.
func (b *backupBench) measureLimits(ctx context.Context, f *BackupFigures) error {
	var err error
	if f.Loopback, err = loopbackMBps(limitBytes); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if f.Disk, err = diskMBps(filepath.Join(b.work, "limit"), limitBytes); err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	if f.StorePut, err = b.storePutMBps(ctx, max(int64(f.Keys)*130/3, 16<<20)); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	b.logf("limits: loopback %.0f MB/s, disk write+fsync %.0f MB/s, store put x3 side by side %.0f MB/s", f.Loopback, f.Disk, f.StorePut)
	return nil
}

// loopbackMBps copies n bytes over a loopback TCP connection into a reader that discards them.
func loopbackMBps(n int64) (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	read := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, err = io.Copy(io.Discard, c)
			_ = c.Close()
		}
		read <- err
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	_, err = io.Copy(c, io.LimitReader(zeros{}, n))
	_ = c.Close()
	if rerr := <-read; err == nil {
		err = rerr
	}
	return float64(n) / time.Since(start).Seconds() / 1e6, err
}

// diskMBps writes n bytes to path, fsyncs and removes it.
func diskMBps(path string, n int64) (float64, error) {
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(path) }()
	start := time.Now()
	_, err = io.Copy(out, io.LimitReader(zeros{}, n))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return float64(n) / time.Since(start).Seconds() / 1e6, err
}

// storePutMBps puts three objects of size bytes into the store at once, from memory, and
// deletes them.
func (b *backupBench) storePutMBps(ctx context.Context, size int64) (float64, error) {
	cfg := b.store.Config()
	cfg.Prefix = "limit"
	c, err := objectstore.New(cfg)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	_, err = sideBySide(ctx, 3, func(ctx context.Context, i int) error {
		_, err := c.Put(ctx, fmt.Sprintf("%d", i), io.LimitReader(zeros{}, size), -1)
		return err
	})
	took := time.Since(start).Seconds()
	for i := range 3 {
		_ = c.Delete(ctx, fmt.Sprintf("%d", i))
	}
	return float64(3*size) / took / 1e6, err
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
