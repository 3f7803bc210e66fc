// Package crashpoint lets a test kill the operator at an exact point between two commands
// of one step, where a SIGKILL from outside lands only by luck. With MWO_CRASHPOINT=<name>
// in its environment, the process exits at once the first time it reaches that point:
// status 137 (as after SIGKILL), no deferred call, no graceful shutdown, no lease release.
// Without the variable, as the operator ships, Reach does nothing.
package crashpoint

import (
	"fmt"
	"os"
)

// Env is the environment variable that arms one crash point by name.
const Env = "MWO_CRASHPOINT"

// ExitCode is the status the process exits with, the one a shell reports after SIGKILL.
const ExitCode = 137

// JoinAfterMeet is reached when a joining Redis node has been sent CLUSTER MEET, before it
// is told which master to replicate: a crash there leaves an empty extra master.
const JoinAfterMeet = "join-after-meet"

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
