package child

import "errors"

// MissingError is a Secret or ConfigMap a spec names that does not exist (yet), or lacks
// what the spec needs of it; Msg names the field and the fix. The operator watches only the
// user objects it has labelled (caching.WatchLabel), and it cannot label one that is not
// there, so no event announces its creation: a controller reports it and looks again after
// a bounded delay instead of waiting for a watch or falling into the error back-off.
type MissingError struct{ Msg string }

func (e *MissingError) Error() string { return e.Msg }

// IsMissing reports whether err is, or wraps, a *MissingError.
func IsMissing(err error) bool {
	var missing *MissingError
	return errors.As(err, &missing)
}
