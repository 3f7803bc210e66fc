package redis

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The back-off of a step that fails against an object store or a tenant's data (a shard's
// load, a backup's manifest, a backup's store): retryFirst after the first failure, doubling
// to retryMost. A corrupted object is then read 4 times in its first minute and about 18 in
// its first hour, where it was read 8 times a second.
const (
	retryFirst = 5 * time.Second
	retryMost  = 5 * time.Minute
)

// backoff is how long a step waits before its next try after failures consecutive failures
// (0 when none): retryFirst, doubling, at most retryMost.
func backoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := retryFirst
	for i := 1; i < failures && d < retryMost; i++ {
		d *= 2
	}
	return min(d, retryMost)
}

// failureKey names one failing step: what (for instance "restore shard 1") of an object.
type failureKey struct {
	object types.NamespacedName
	what   string
}

// failure is the record of a failing step: its consecutive failures, the last one's
// message and when the step may be tried again.
type failure struct {
	count   int
	message string
	next    time.Time
}

// failures remembers the steps that fail, so that each waits its back-off before it is tried
// again whatever wakes its object, and so that a failure is reported once, not once per try.
// It is in memory: a new operator tries each step once more at once.
type failures struct {
	mu sync.Mutex
	m  map[failureKey]*failure
}

// fail records a failure of k with message at now. It returns how long until the next try,
// and whether the failure is new (the first, or another message than the last) and so
// deserves an event.
func (f *failures) fail(k failureKey, message string, now time.Time) (wait time.Duration, distinct bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[failureKey]*failure{}
	}
	rec := f.m[k]
	if rec == nil {
		rec = &failure{}
		f.m[k] = rec
	}
	distinct = rec.count == 0 || rec.message != message
	rec.count++
	rec.message = message
	wait = backoff(rec.count)
	rec.next = now.Add(wait)
	return wait, distinct
}

// waiting returns, while k backs off at now, how long is left and the last failure's
// message; zero and "" when k may be tried.
func (f *failures) waiting(k failureKey, now time.Time) (time.Duration, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.m[k]
	if rec == nil || !now.Before(rec.next) {
		return 0, ""
	}
	return rec.next.Sub(now), rec.message
}

// count is how many times in a row k failed.
func (f *failures) count(k failureKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rec := f.m[k]; rec != nil {
		return rec.count
	}
	return 0
}

// succeeded forgets the failures of k.
func (f *failures) succeeded(k failureKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, k)
}

// forget drops every record of object (deleted, or done).
func (f *failures) forget(object types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	deleteObject(f.m, object)
}

// deleteObject deletes the entries of object from m.
func deleteObject[V any](m map[failureKey]V, object types.NamespacedName) {
	for k := range m {
		if k.object == object {
			delete(m, k)
		}
	}
}
