package execute

import (
	"context"
	"fmt"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
)

// Run sends the commands of a recovery, in order, stopping at the first error.
func (a *Admin) Run(ctx context.Context, action recovery.Action) error {
	for _, c := range action.Commands {
		args := make([]any, len(c.Args))
		for i, arg := range c.Args {
			args[i] = arg
		}
		if err := a.Client(c.Addr).Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("while running %s: %w", c, err)
		}
	}
	return nil
}
