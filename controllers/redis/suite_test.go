package redis_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

var (
	env     *testenv.Env
	kubelet *redispods.Kubelet
	// creates counts the topology changes (formations and introductions) the operator made.
	creates atomic.Int64
)

// countingAdmin counts Create calls.
type countingAdmin struct{ rediscontrollers.Admin }

func (c countingAdmin) Create(ctx context.Context, plan redisadmin.Plan) error {
	creates.Add(1)
	return c.Admin.Create(ctx, plan)
}

func (c countingAdmin) Heal(ctx context.Context, addrs []string) (int, error) {
	n, err := c.Admin.Heal(ctx, addrs)
	creates.Add(int64(n))
	return n, err
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(context.Background(), 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubelet = redispods.New(env.Client, env.Cluster.Dir+"/redis-data", logf)
	kubeletDone := make(chan struct{})
	go func() { kubelet.Run(ctx); close(kubeletDone) }()
	defer func() { cancel(); <-kubeletDone }()

	_, stop, err := env.StartManager(func(mgr ctrl.Manager) error {
		return (&rediscontrollers.RedisClusterReconciler{
			Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("rediscluster-controller"),
			NewAdmin: func(password string) rediscontrollers.Admin {
				return countingAdmin{rediscontrollers.DefaultAdminFactory(password)}
			},
		}).SetupWithManager(mgr, controller.Options{})
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = stop() }()
	return m.Run()
}

// logf prints the Redis kubelet's progress when MWO_TEST_VERBOSE is set.
func logf(format string, args ...any) {
	if os.Getenv("MWO_TEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}
