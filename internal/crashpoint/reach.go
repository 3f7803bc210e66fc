//go:build crashpoints

package crashpoint

import (
	"fmt"
	"os"
)

// armed is the crash point named by Env, read once.
var armed = os.Getenv(Env)

// Reach ends the process when name is the armed crash point.
func Reach(name string) {
	if armed == "" || armed != name {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint %s reached: exiting with status %d as if killed\n", name, ExitCode)
	os.Exit(ExitCode)
}

// Armed reports whether name is the armed crash point, for a point that must prepare
// (flush what it sent, say) before it is reached.
func Armed(name string) bool { return armed != "" && armed == name }
