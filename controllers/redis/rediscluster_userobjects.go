package redis

import "errors"

// userObjectMissingError is a Secret or ConfigMap a spec names that does not exist (yet).
// The operator watches only the user objects it has labelled (caching.WatchLabel), and it
// cannot label one that is not there, so no event announces its creation: the reconcile
// looks again after plan.LookIdle (a bounded requeue) instead of waiting for a watch
// or falling into the error backoff.
type userObjectMissingError struct{ msg string }

func (e *userObjectMissingError) Error() string { return e.msg }

// userObjectMissing reports whether err is, or wraps, a userObjectMissingError.
func userObjectMissing(err error) bool {
	var missing *userObjectMissingError
	return errors.As(err, &missing)
}
