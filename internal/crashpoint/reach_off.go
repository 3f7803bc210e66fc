//go:build !crashpoints

package crashpoint

// Reach does nothing: this binary was built without crash points.
func Reach(string) {}

// Armed is false: this binary was built without crash points.
func Armed(string) bool { return false }
