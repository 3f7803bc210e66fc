package redispods

import (
	"os"
	"sync"
)

// writtenVolumes remembers, per volume directory, the version of what was last written
// there (the pod's UID and its sources' resourceVersions). Comparing every file of every
// pod's volumes ten times a second was most of a test binary's CPU; now a sync rewrites a
// directory only when its version changed or the directory is gone.
type writtenVolumes struct {
	mu       sync.Mutex
	versions map[string]string // directory -> version
}

// current reports whether dir exists and was last written at version.
func (w *writtenVolumes) current(dir, version string) bool {
	w.mu.Lock()
	written, ok := w.versions[dir]
	w.mu.Unlock()
	if !ok || written != version {
		return false
	}
	_, err := os.Stat(dir)
	return err == nil
}

// write makes dir hold exactly the files made by files (writeFiles) unless it is current
// at version, and records version once written: files is called only when a write is due,
// so an unchanged volume costs no copy of its content.
func (w *writtenVolumes) write(dir, version string, files func() map[string][]byte) error {
	if w.current(dir, version) {
		return nil
	}
	if err := writeFiles(dir, files()); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[string]string{}
	}
	w.versions[dir] = version
	return nil
}
