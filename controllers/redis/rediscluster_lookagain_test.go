package redis

import (
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/redisadmin"
)

// TestLookAgain: an idle look's wait counts from when the look began (a slow look does not
// stretch the time between looks), never below half the idle wait; a step's own wait and a
// settling node's are kept as they are.
func TestLookAgain(t *testing.T) {
	idle := redisadmin.IdleLook(5 * time.Second)
	cases := []struct {
		name      string
		step      redisadmin.Step
		tookSoFar time.Duration
		settled   time.Duration
		min, max  time.Duration
	}{
		{"idle, quick look", redisadmin.Step{Kind: redisadmin.StepIdle, After: idle}, 0, 0, idle - 100*time.Millisecond, idle},
		{"idle, a 1 s look waits 1 s less", redisadmin.Step{Kind: redisadmin.StepIdle, After: idle}, time.Second, 0, idle - 1100*time.Millisecond, idle - time.Second},
		{"idle, a 2 s look waits half", redisadmin.Step{Kind: redisadmin.StepIdle, After: idle}, 2 * time.Second, 0, idle / 2, idle / 2},
		{"idle, a look longer than the wait", redisadmin.Step{Kind: redisadmin.StepIdle, After: idle}, 2 * idle, 0, idle / 2, idle / 2},
		{"a step's wait is its own", redisadmin.Step{Kind: redisadmin.StepForm, After: redisadmin.LookSoon}, time.Second, 0, redisadmin.LookSoon, redisadmin.LookSoon},
		{"a settling node comes first", redisadmin.Step{Kind: redisadmin.StepIdle, After: idle}, 0, 300 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &state{step: c.step, began: time.Now().Add(-c.tookSoFar)}
			s.health.SettledIn = c.settled
			if got := s.lookAgain(); got < c.min || got > c.max {
				t.Errorf("lookAgain() = %s, want within [%s, %s]", got, c.min, c.max)
			}
		})
	}
}
