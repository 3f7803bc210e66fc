package rdbload

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// errLoadEnded is what the download sees when the load stops reading.
var errLoadEnded = errors.New("the load ended")

// LoadObject loads the RDB stored as name in store into the node of opts as it downloads:
// the file passes through a pipe, never whole in memory or on disk. want is the size and
// SHA-256 the backup's manifest recorded: a download that differs fails the load with
// objectstore.ErrChecksum once its last byte has passed (the keys sent before stay on the
// node, see the package's doc). Either side failing stops the other.
func LoadObject(ctx context.Context, opts Options, store *objectstore.Client, name string, want objectstore.Digest) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	downloaded := make(chan error, 1)
	go func() {
		_, err := store.Get(ctx, name, pw, &want)
		// The load sees the end of the stream, or the download's error instead of an EOF.
		_ = pw.CloseWithError(err)
		downloaded <- err
	}()
	res, err := Load(ctx, opts, pr)
	_ = pr.CloseWithError(errLoadEnded) // unblocks a download still writing
	cancel()
	getErr := <-downloaded
	// A failed download is the cause when the load only saw its error come through the pipe,
	// and decides when the load succeeded (Load reads its input to the end, so it should
	// not): the download's check (size, SHA-256) has the last word.
	if getErr != nil && (err == nil || !errors.Is(getErr, errLoadEnded) && !errors.Is(getErr, context.Canceled)) {
		return res, fmt.Errorf("while loading %s into %s: %w", name, opts.Node.Addr, getErr)
	}
	return res, err
}
