package backup

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// errUploadEnded is what the fetch sees when the upload stops reading.
var errUploadEnded = errors.New("the upload ended")

// StreamShard takes a snapshot of the node that opts names and uploads it to store as the
// object name while it arrives: the RDB passes through a pipe, never whole in memory or on
// disk. It returns what the node said of the snapshot, with the SHA-256 of the bytes that
// went to the store (hashed once, as they arrived), and what the store stored; their sizes
// agree, or it fails. Either side failing stops the other: a node that
// dies mid-transfer aborts the upload (no object is left), a store that refuses ends the
// transfer from the node.
func StreamShard(ctx context.Context, opts rdbstream.Options, store *objectstore.Client, name string) (rdbstream.Result, objectstore.Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	fetched := make(chan struct{})
	var res rdbstream.Result
	var fetchErr error
	go func() {
		defer close(fetched)
		res, fetchErr = rdbstream.Fetch(ctx, opts, pw)
		// The upload sees the end of the stream, or the fetch's error instead of an EOF.
		_ = pw.CloseWithError(fetchErr)
	}()
	obj, putErr := store.PutUnhashed(ctx, name, &crashMidUpload{r: pr}, -1)
	_ = pr.CloseWithError(errUploadEnded) // unblocks a fetch still writing
	cancel()
	<-fetched
	switch {
	case putErr != nil && (fetchErr == nil || errors.Is(fetchErr, errUploadEnded) || errors.Is(fetchErr, context.Canceled)):
		// The store failed first; the fetch only saw the pipe close.
		return res, obj, fmt.Errorf("while uploading the snapshot of %s: %w", opts.Addr, putErr)
	case fetchErr != nil:
		if putErr == nil {
			// The store took an object the node did not finish: remove it.
			_ = store.Delete(context.WithoutCancel(ctx), name)
		}
		return res, obj, fmt.Errorf("while taking the snapshot of %s: %w", opts.Addr, fetchErr)
	case obj.Size != res.Bytes:
		return res, obj, fmt.Errorf("the snapshot of %s has %d bytes but %d were uploaded", opts.Addr, res.Bytes, obj.Size)
	}
	obj.SHA256 = res.SHA256
	return res, obj, nil
}

// crashMidUpload passes a shard's stream to the upload and reaches the crash point
// BackupMidUpload once crashpoint.MidUploadBytes have passed (tests/ha; nothing in the
// shipped build).
type crashMidUpload struct {
	r    io.Reader
	read int
}

func (c *crashMidUpload) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.read < crashpoint.MidUploadBytes && c.read+n >= crashpoint.MidUploadBytes {
		crashpoint.Reach(crashpoint.BackupMidUpload)
	}
	c.read += n
	return n, err
}
