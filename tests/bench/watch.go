package bench

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// watching is a cache of the objects in namespaces that the bench's waits read, with the
// function that stops it. The bench watches instead of listing from the API server at each
// poll: a poll's LIST of N Deployments or AppServices costs the API server as much as many
// writes, so polling taxed the waves it measured, the longer ones most.
func watching(ctx context.Context, env *testenv.Env, namespaces ...string) (client.Reader, func(), error) {
	byNamespace := map[string]cache.Config{}
	for _, ns := range namespaces {
		byNamespace[ns] = cache.Config{}
	}
	c, err := cache.New(env.Cluster.Config, cache.Options{
		Scheme: env.Scheme, DefaultNamespaces: byNamespace, DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		<-done
		return nil, nil, fmt.Errorf("the bench's watches never synced")
	}
	return c, func() { cancel(); <-done }, nil
}
