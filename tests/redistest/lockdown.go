package redistest

import (
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// LockedDownCommands are what the last lines of the generated redis.conf refuse to every
// client (enable-debug-command, enable-module-command and enable-protected-configs no), with
// the words of Redis's refusal.
var LockedDownCommands = []struct {
	Cmd     []any
	Refusal string
}{
	{[]any{"DEBUG", "SLEEP", 0}, "DEBUG command not allowed"},
	{[]any{"MODULE", "LOAD", "/nonexistent.so"}, "MODULE command not allowed"},
	{[]any{"CONFIG", "SET", "dir", "/tmp"}, "protected config"},
}

// CheckLockedDown fails t unless c's node refuses every command of LockedDownCommands with
// its refusal; who names the node in the failure.
func CheckLockedDown(t *testing.T, c *goredis.Client, who string) {
	t.Helper()
	for _, tc := range LockedDownCommands {
		if err := c.Do(t.Context(), tc.Cmd...).Err(); err == nil || !strings.Contains(err.Error(), tc.Refusal) {
			t.Errorf("%s: %v answered %v, want a refusal saying %q", who, tc.Cmd, err, tc.Refusal)
		}
	}
}
