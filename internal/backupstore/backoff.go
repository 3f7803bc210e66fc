package backupstore

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

// Backoff is how long a step waits before its next try after failures consecutive failures
// (0 when none): retryFirst, doubling, at most retryMost.
func Backoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := retryFirst
	for i := 1; i < failures && d < retryMost; i++ {
		d *= 2
	}
	return min(d, retryMost)
}

// FailureKey names one failing step: What (for instance "restore shard 1") of an Object.
type FailureKey struct {
	Object types.NamespacedName
	What   string
}

// failure is the record of a failing step: its consecutive failures, the last one's
// message and when the step may be tried again.
type failure struct {
	count   int
	message string
	next    time.Time
}

// Failures remembers the steps that fail, so that each waits its back-off before it is tried
// again whatever wakes its object, and so that a failure is reported once, not once per try.
// It is in memory: a new operator tries each step once more at once. The zero Failures
// remembers none and is ready to use.
type Failures struct {
	mu sync.Mutex
	m  map[FailureKey]*failure
}

// Fail records a failure of k with message at now. It returns how long until the next try,
// and whether the failure is new (the first, or another message than the last) and so
// deserves an event.
func (f *Failures) Fail(k FailureKey, message string, now time.Time) (wait time.Duration, distinct bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[FailureKey]*failure{}
	}
	rec := f.m[k]
	if rec == nil {
		rec = &failure{}
		f.m[k] = rec
	}
	distinct = rec.count == 0 || rec.message != message
	rec.count++
	rec.message = message
	wait = Backoff(rec.count)
	rec.next = now.Add(wait)
	return wait, distinct
}

// Waiting returns, while k backs off at now, how long is left and the last failure's
// message; zero and "" when k may be tried.
func (f *Failures) Waiting(k FailureKey, now time.Time) (time.Duration, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.m[k]
	if rec == nil || !now.Before(rec.next) {
		return 0, ""
	}
	return rec.next.Sub(now), rec.message
}

// Count is how many times in a row k failed.
func (f *Failures) Count(k FailureKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rec := f.m[k]; rec != nil {
		return rec.count
	}
	return 0
}

// Succeeded forgets the failures of k.
func (f *Failures) Succeeded(k FailureKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, k)
}

// Forget drops every record of object (deleted, or done).
func (f *Failures) Forget(object types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	DeleteObject(f.m, object)
}

// DeleteObject deletes the entries of object from m.
func DeleteObject[V any](m map[FailureKey]V, object types.NamespacedName) {
	for k := range m {
		if k.Object == object {
			delete(m, k)
		}
	}
}
