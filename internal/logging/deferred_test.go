package logging

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// countingSink counts the WithValues calls that reach it.
type countingSink struct {
	logr.LogSink
	withValues *int
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.withValues++
	return countingSink{LogSink: c.LogSink.WithValues(kv...), withValues: c.withValues}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{LogSink: c.LogSink.WithName(name), withValues: c.withValues}
}

// TestDeferredWritesTheSameLines: lines written through Deferred are those written
// directly, names and values included, at every verbosity; and values added to a logger
// that writes nothing never reach the sink.
func TestDeferredWritesTheSameLines(t *testing.T) {
	var direct, deferred []string
	opts := funcr.Options{Verbosity: 1}
	plain := funcr.New(func(prefix, args string) { direct = append(direct, prefix+" "+args) }, opts)
	withValues := 0
	base := funcr.New(func(prefix, args string) { deferred = append(deferred, prefix+" "+args) }, opts)
	wrapped := Deferred(logr.New(countingSink{LogSink: base.GetSink(), withValues: &withValues}))

	use := func(l logr.Logger) {
		l = l.WithName("controller").WithValues("kind", "RedisCluster", "name", "cache").WithName("step")
		l.Info("step", "kind", "Join")
		l.V(1).Info("detail", "n", 1)
		l.V(2).Info("hidden")
		l.WithValues("reconcileID", "r1").Error(errors.New("boom"), "failed", "n", 2)
	}
	use(plain)
	use(wrapped)
	if strings.Join(direct, "\n") != strings.Join(deferred, "\n") || len(direct) != 3 {
		t.Fatalf("direct:\n%s\ndeferred:\n%s", strings.Join(direct, "\n"), strings.Join(deferred, "\n"))
	}

	withValues = 0
	quiet := wrapped.WithValues("controller", "rediscluster").WithValues("reconcileID", "r2")
	quiet.V(3).Info("not written")
	if withValues != 0 {
		t.Errorf("%d WithValues reached the sink for a logger that wrote nothing", withValues)
	}
}
