// Package fuzzcorpus writes the seed corpus of a Go fuzz target in the file format `go test`
// reads from testdata/fuzz/<target>, for the tests that regenerate a package's seeds.
package fuzzcorpus

import (
	"os"
	"path/filepath"
	"strconv"
)

// Write writes each seed (a []byte input) as testdata/fuzz/<target>/<name>, below the
// current directory (a test's package folder).
func Write(target string, seeds map[string][]byte) error {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range seeds {
		text := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil { //nolint:gosec // corpus files are read by go test, not secret
			return err
		}
	}
	return nil
}
