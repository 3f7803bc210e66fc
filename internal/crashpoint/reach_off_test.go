//go:build !crashpoints

package crashpoint

import (
	"os"
	"os/exec"
	"testing"
)

// TestShippedBuildNeverExits runs this test binary again with a crash point armed in its
// environment from the start, as the operator would be: built without the tag, reaching the
// point must not end the process.
func TestShippedBuildNeverExits(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		if Armed(JoinAfterMeet) {
			os.Exit(3) // a shipped build must not even prepare for a crash point
		}
		Reach(JoinAfterMeet)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestShippedBuildNeverExits$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", Env+"="+JoinAfterMeet)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a shipped build reaching an armed crash point ended: %v\n%s", err, out)
	}
}
