// Command controller runs cert-manager's controllers (from the
// github.com/cert-manager/cert-manager module's pkg/controller) out of cluster
// against a kubeconfig: the part of cert-manager's controller binary that a
// test needs, without its metrics, profiling, healthz and leader election.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"

	// Each of these registers its controller with controller.Register in init.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer types the issuers and clusterissuers controllers set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "watch only this namespace (ClusterIssuers are then unsupported)")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "kube-system", "namespace of ClusterIssuers' secrets")
	controllers := flag.String("controllers", "*", "comma-separated controllers to run; * for every registered one")
	workers := flag.Int("concurrent-workers", 5, "workers per controller")
	featureGates := flag.String("feature-gates", "", "cert-manager feature gates, k=v,...")
	klog.InitFlags(flag.CommandLine) // -v
	flag.Parse()

	logf.InitLogs()
	defer logf.FlushLogs()
	if *featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(*featureGates); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")

	if *namespace != "" && *controllers == "*" {
		*controllers = "*,-clusterissuers"
	}
	if err := run(ctx, *kubeconfig, *namespace, *clusterResourceNamespace, *controllers, *workers); err != nil {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, clusterResourceNamespace, controllers string, workers int) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			// The defaults of cert-manager's own flags.
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}

	enabled := map[string]bool{}
	for _, n := range strings.Split(controllers, ",") {
		switch {
		case n == "*":
			for k := range controller.Known() {
				enabled[k] = true
			}
		case strings.HasPrefix(n, "-"):
			delete(enabled, strings.TrimPrefix(n, "-"))
		case n != "":
			enabled[n] = true
		}
	}

	// Construct every controller before the informer factories start: the
	// constructors register the informers they need.
	var loops []controller.Interface
	for name, newController := range controller.Known() {
		if !enabled[name] {
			continue
		}
		c, err := newController(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		logf.Log.Info("starting controller", "controller", name)
		loops = append(loops, c)
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(loops))
	for _, c := range loops {
		wg.Go(func() {
			if err := c.Run(workers, ctx); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
