// Package logging holds what the operator adds to its logger.
package logging

import (
	"slices"

	"github.com/go-logr/logr"
)

// Deferred wraps l so that the names and key/value pairs added with WithName and
// WithValues reach l's sink only when a line is written. controller-runtime adds five pairs
// to the logger of every reconcile (controller, kind, namespace, name, reconcileID), and a
// JSON sink encodes them on the spot: a converged reconcile, which logs nothing, paid for
// that encoding at every look. Lines come out exactly as through l.
func Deferred(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	return logr.New(&deferredSink{base: sink})
}

// deferredOp is one WithName (name set) or WithValues (values set) not yet applied.
type deferredOp struct {
	name   string
	values []any
}

// deferredSink holds the operations to apply to base before a line is written.
type deferredSink struct {
	base logr.LogSink
	ops  []deferredOp
}

// Init hands the call depth on, one deeper for this sink's own frame.
func (d *deferredSink) Init(info logr.RuntimeInfo) {
	info.CallDepth++
	d.base.Init(info)
}

// Enabled asks the underlying sink; names and values do not change what it writes.
func (d *deferredSink) Enabled(level int) bool { return d.base.Enabled(level) }

// Info writes a line through the underlying sink with every deferred name and value.
func (d *deferredSink) Info(level int, msg string, keysAndValues ...any) {
	d.applied().Info(level, msg, keysAndValues...)
}

// Error writes an error line through the underlying sink with every deferred name and value.
func (d *deferredSink) Error(err error, msg string, keysAndValues ...any) {
	d.applied().Error(err, msg, keysAndValues...)
}

// WithValues defers the pairs.
func (d *deferredSink) WithValues(keysAndValues ...any) logr.LogSink {
	return &deferredSink{base: d.base, ops: append(slices.Clip(d.ops), deferredOp{values: keysAndValues})}
}

// WithName defers the name.
func (d *deferredSink) WithName(name string) logr.LogSink {
	return &deferredSink{base: d.base, ops: append(slices.Clip(d.ops), deferredOp{name: name})}
}

// WithCallDepth passes a caller's depth on to an underlying sink that reports callers.
func (d *deferredSink) WithCallDepth(depth int) logr.LogSink {
	if c, ok := d.base.(logr.CallDepthLogSink); ok {
		return &deferredSink{base: c.WithCallDepth(depth), ops: d.ops}
	}
	return d
}

// applied is the underlying sink with the deferred operations applied, in order.
func (d *deferredSink) applied() logr.LogSink {
	s := d.base
	for _, op := range d.ops {
		if op.values != nil {
			s = s.WithValues(op.values...)
		} else {
			s = s.WithName(op.name)
		}
	}
	return s
}
