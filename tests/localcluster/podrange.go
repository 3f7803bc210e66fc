package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// podRanges are the pod address ranges local clusters take, one each: 127.1.0.0/16 in eight
// /19s of 8,190 addresses. Clusters running at once (two test packages, the fault tests'
// clusters run two at a time, a test and `make run`) must not give two pods the same
// loopback IP, or one redis-server cannot bind and the other answers for a pod that is not
// its own.
var podRanges = []string{"127.1.0.0/19", "127.1.32.0/19", "127.1.64.0/19", "127.1.96.0/19",
	"127.1.128.0/19", "127.1.160.0/19", "127.1.192.0/19", "127.1.224.0/19"}

// takePodRange locks the first free range (a lock file per range in the temp dir, held by
// the returned file until it is closed or the process ends) and returns it. When every
// range is taken it returns the first, unlocked, with a nil file.
func takePodRange() (string, *os.File) {
	for i, r := range podRanges {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("middleware-operator-pod-range-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return r, f
		}
		_ = f.Close()
	}
	return podRanges[0], nil
}
