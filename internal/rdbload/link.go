package rdbload

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// link is the pipeline's connection with its deadlines: every write must complete, and every
// read see data, within idle; a cancel makes both fail at once, even one already begun, and
// no later deadline undoes it. While the writer waits for its input (the RDB), the commands
// it buffered may be unsent, so a read that times out then is retried.
type link struct {
	conn net.Conn
	idle time.Duration // 0: no deadline

	// feeding is true while the writer reads its input.
	feeding atomic.Bool

	mu        sync.Mutex
	cancelled bool
}

// errCancelled is what a read or write returns after cancel.
var errCancelled = errors.New("cancelled")

// deadline sets the read or write deadline idle from now, unless cancelled.
func (l *link) deadline(set func(time.Time) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancelled {
		return errCancelled
	}
	if l.idle <= 0 {
		return nil
	}
	return set(time.Now().Add(l.idle))
}

func (l *link) cancel() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelled = true
	_ = l.conn.SetDeadline(time.Unix(1, 0))
}

// readerOf and writerOf are the two directions of l.
func readerOf(l *link) io.Reader { return linkReader{l} }
func writerOf(l *link) io.Writer { return linkWriter{l} }

type linkReader struct{ *link }

func (l linkReader) Read(p []byte) (int, error) {
	for {
		if err := l.deadline(l.conn.SetReadDeadline); err != nil {
			return 0, err
		}
		n, err := l.conn.Read(p)
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() && l.feeding.Load() {
			continue
		}
		return n, err
	}
}

type linkWriter struct{ *link }

func (l linkWriter) Write(p []byte) (int, error) {
	if err := l.deadline(l.conn.SetWriteDeadline); err != nil {
		return 0, err
	}
	return l.conn.Write(p)
}
