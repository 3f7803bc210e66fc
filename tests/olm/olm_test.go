package olm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/monitoring"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

const (
	packageName       = "middleware-operator"
	channelName       = "stable"
	olmNamespace      = "olm"
	operatorNamespace = "middleware-operator-system"
	// targetNamespace is the one namespace the OperatorGroup targets (SingleNamespace mode);
	// otherNamespace is outside it, so the operator must leave it alone.
	targetNamespace   = "mwo-apps"
	otherNamespace    = "mwo-other"
	catalogSourceName = "middleware-operator-catalog"
	deploymentName    = "middleware-operator-controller-manager"
	olmPort           = 8080 // olm's health/metrics port, fixed
	catalogPort       = 8443 // catalog's, fixed when it serves TLS
)

// flow is the state the steps of the OLM e2e tests share.
type flow struct {
	t       *testing.T
	cluster *localcluster.Cluster
	cl      client.Client
	logDir  string
	// ns is the namespace the operator is installed in (its OperatorGroup and Subscription);
	// targets are the OperatorGroup's target namespaces (none: AllNamespaces); appsNS is
	// where the test creates the custom resources the operator must reconcile.
	ns      string
	targets []string
	appsNS  string
	// installed is the version waitInstalled last saw installed.
	installed string
	// token is the operator's ServiceAccount token runOperator last ran it with.
	token string
	// oldVersion is what the current bundle replaces; newVersion is the current bundle's.
	oldVersion, newVersion string
	olm, catalog           *localcluster.Process
	operatorBin            string
}

// TestInstallAndUpgradeThroughOLM installs the operator through a Subscription to the older
// version of the stable channel, creates the CSV's examples and runs the operator on them,
// then publishes the current version in the catalog and checks OLM upgrades to it with the
// custom resources intact and still reconciled. The package doc says what differs from OLM
// on a real cluster.
func TestInstallAndUpgradeThroughOLM(t *testing.T) {
	ph := newPhase(t)
	f := &flow{t: t, logDir: t.TempDir(), ns: operatorNamespace, targets: []string{targetNamespace}, appsNS: targetNamespace}
	if os.Getenv("MWO_KEEP_CLUSTER_DIR") != "" {
		// Keep the logs of olm, catalog, opm and the operator for a look after the test.
		var err error
		if f.logDir, err = os.MkdirTemp("", "mwo-olm-e2e-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("logs in %s", f.logDir)
	}
	f.oldVersion, f.newVersion = bundleVersions(t)
	t.Logf("upgrade under test: %s -> %s on channel %s", csvName(f.oldVersion), csvName(f.newVersion), channelName)

	f.startCluster(2)
	ph.done("local cluster started")

	f.installOLM()
	ph.done("OLM CRDs applied, olm and catalog operators running")

	f.buildOperator()
	ph.done("operator binary built")

	catalogAddrPort := testenv.FreePorts(t, 1)[0]
	v1 := filepath.Join(t.TempDir(), "catalog")
	writeCatalog(t, v1, f.oldVersion)
	opm := f.serveCatalog("opm-v"+f.oldVersion, v1, catalogAddrPort)
	f.createCatalogSource(catalogAddrPort, opm)
	ph.done("catalog with " + csvName(f.oldVersion) + " served, CatalogSource READY")

	f.subscribe()
	f.waitInstalled(f.oldVersion, "")
	ph.done("Subscription -> InstallPlan Complete -> " + csvName(f.oldVersion) + " Succeeded")

	crs := f.createExamples()
	operator := f.runOperator("operator-v" + f.oldVersion)
	f.waitReconciled(crs, operator)
	f.checkOutsideUntouched()
	ph.done("CSV examples reconciled by the operator with OLM's RBAC and WATCH_NAMESPACE")

	// The next version reaches the catalog: opm serves the catalog/ of the repository, whose
	// channel has the current bundle replacing the older one.
	opm.Stop(10 * time.Second)
	f.serveCatalog("opm-v"+f.newVersion, filepath.Join(testenv.RepoRoot(), "catalog"), catalogAddrPort)
	f.waitInstalled(f.newVersion, f.oldVersion)
	ph.done("upgraded along " + channelName + ": " + csvName(f.newVersion) + " Succeeded, " + csvName(f.oldVersion) + " replaced")

	// The Deployment rolled to the new pods: run the operator as they would.
	operator.Stop(20 * time.Second)
	operator = f.runOperator("operator-v" + f.newVersion)
	f.checkIntact(crs)
	f.checkStillReconciled(crs, operator)
	ph.done("custom resources intact and still reconciled after the upgrade")

	// Installed on a cluster without the Prometheus Operator; its CRDs arrive later.
	f.checkMonitoringObjectsAppear(operator)
	ph.done("Prometheus Operator CRDs installed: the operator created its ServiceMonitor and PrometheusRule")
}

// checkMonitoringObjectsAppear installs the Prometheus Operator's ServiceMonitor and
// PrometheusRule CRDs (v0.85.0, from its module) after the operator runs, and waits for the
// operator to create both objects in its namespace, within the minute the README promises.
// The API server validates them against the real CRD schemas.
func (f *flow) checkMonitoringObjectsAppear(operator *localcluster.Process) {
	t := f.t
	crds, err := filepath.EvalSymlinks(binPath(t, "monitoring-crds"))
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, f.cluster.Kubeconfig, "apply", "--server-side", "-f", crds)
	kubectl(t, f.cluster.Kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds)
	installed := time.Now()
	eventually(t, time.Minute, "the operator's ServiceMonitor and PrometheusRule", func(ctx context.Context) (bool, string) {
		var missing []string
		for kind, name := range map[string]string{"ServiceMonitor": monitoring.ServiceMonitorName, "PrometheusRule": monitoring.PrometheusRuleName} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(monitoring.GroupVersion.WithKind(kind))
			if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
				missing = append(missing, fmt.Sprintf("%s %s: %v", kind, name, err))
				continue
			}
			if kind == "PrometheusRule" {
				groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
				if len(groups) == 0 {
					missing = append(missing, "PrometheusRule without groups")
				}
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	}, operator)
	t.Logf("the ServiceMonitor and the PrometheusRule appeared %s after their CRDs", time.Since(installed).Round(100*time.Millisecond))
}

// bundleVersions reads the current bundle's version and the version it replaces.
// startCluster starts a local cluster of nodes nodes, stopped when the test ends, and a
// client of it that knows OLM's kinds.
func (f *flow) startCluster(nodes int) {
	t := f.t
	var err error
	f.cluster, err = localcluster.Start(t.Context(), localcluster.Options{Nodes: nodes, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cluster.Stop)
	scheme := testenv.Scheme()
	utilruntime.Must(operatorsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(operatorsv1.AddToScheme(scheme))
	if f.cl, err = client.New(f.cluster.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
}

func bundleVersions(t *testing.T) (oldVersion, newVersion string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bundle", "manifests", packageName+".clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var csv operatorsv1alpha1.ClusterServiceVersion
	if err := yaml.Unmarshal(data, &csv); err != nil {
		t.Fatal(err)
	}
	oldVersion = strings.TrimPrefix(csv.Spec.Replaces, packageName+".v")
	if csv.Spec.Replaces == "" || oldVersion == csv.Spec.Replaces {
		t.Fatalf("the current CSV replaces %q, want %s.v<older version>", csv.Spec.Replaces, packageName)
	}
	return oldVersion, csv.Spec.Version.String()
}

// installOLM applies OLM's CRDs and starts its olm and catalog operators out of cluster.
func (f *flow) installOLM() {
	t := f.t
	crds, err := filepath.EvalSymlinks(binPath(t, "olm-crds")) // kubectl does not follow a linked folder
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, f.cluster.Kubeconfig, "apply", "--server-side", "-f", crds)
	kubectl(t, f.cluster.Kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds)
	for _, ns := range f.namespaces() {
		if err := f.cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := f.cluster.WaitForDefaultServiceAccount(t.Context(), ns); err != nil {
			t.Fatal(err)
		}
	}

	requirePortFree(t, olmPort, "OLM's olm operator")
	requirePortFree(t, catalogPort, "OLM's catalog operator")
	cert, key := selfSignedCert(t, f.logDir)
	// olm reads the kubeconfig from KUBECONFIG only; OPERATOR_NAMESPACE/NAME are what its
	// Deployment sets.
	f.olm = start(t, f.logDir, "olm", binPath(t, "olm"),
		[]string{"--namespace", olmNamespace, "--writeStatusName=", "--writePackageServerStatusName="},
		[]string{"KUBECONFIG=" + f.cluster.Kubeconfig, "OPERATOR_NAMESPACE=" + olmNamespace, "OPERATOR_NAME=olm-operator"})
	// With a certificate catalog serves on :8443 instead of olm's :8080.
	f.catalog = start(t, f.logDir, "catalog", binPath(t, "catalog"),
		[]string{"--namespace", olmNamespace, "--kubeconfig", f.cluster.Kubeconfig, "--writeStatusName=",
			"--set-workload-user-id=false", "--tls-cert", cert, "--tls-key", key, "--client-ca", cert}, nil)
	if err := f.olm.WaitFor(2*time.Minute, func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", olmPort)) }); err != nil {
		t.Fatal(err)
	}
	if err := f.catalog.WaitFor(2*time.Minute, func() error { return httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", catalogPort)) }); err != nil {
		t.Fatal(err)
	}
	// Before olm stops: OLM's objects carry finalizers only olm removes (CSVs have
	// operators.coreos.com/csv-cleanup), and uninstalling is part of the lifecycle too.
	t.Cleanup(f.uninstall)
}

// buildOperator builds the operator binary, which both bundle versions run here.
func (f *flow) buildOperator() {
	f.operatorBin = filepath.Join(f.logDir, "manager")
	build := exec.Command("go", "build", "-o", f.operatorBin, ".")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		f.t.Fatalf("go build: %v\n%s", err, out)
	}
}

// serveCatalog runs opm serve on the catalog dir at the loopback port.
func (f *flow) serveCatalog(name, dir string, port int) *localcluster.Process {
	t := f.t
	p := start(t, f.logDir, name, binPath(t, "opm"), []string{"serve", dir, "-p", strconv.Itoa(port),
		"--pprof-addr", "127.0.0.1:" + strconv.Itoa(testenv.FreePorts(t, 1)[0]), "-t", filepath.Join(f.logDir, name+".termination-log")}, nil)
	if err := p.WaitFor(time.Minute, func() error { return tcpOpen(port) }); err != nil {
		t.Fatal(err)
	}
	return p
}

// createCatalogSource adds a grpc CatalogSource pointing at opm serve, in OLM's namespace so
// every namespace may subscribe from it, and waits until catalog reports it READY.
func (f *flow) createCatalogSource(port int, opm *localcluster.Process) {
	t := f.t
	cs := &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: catalogSourceName, Namespace: olmNamespace},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType:  operatorsv1alpha1.SourceTypeGrpc,
			Address:     fmt.Sprintf("127.0.0.1:%d", port),
			DisplayName: "Middleware Operator",
			Publisher:   "middleware-operator",
		},
	}
	if err := f.cl.Create(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "CatalogSource READY", func(ctx context.Context) (bool, string) {
		if err := f.cl.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil {
			return false, err.Error()
		}
		if cs.Status.GRPCConnectionState == nil {
			return false, "no connection state yet"
		}
		return cs.Status.GRPCConnectionState.LastObservedState == "READY", "state " + cs.Status.GRPCConnectionState.LastObservedState
	}, f.catalog, opm)
}

// namespaces are the namespaces the flow needs: OLM's, the operator's, its targets and
// otherNamespace, each once.
func (f *flow) namespaces() []string {
	var out []string
	for _, ns := range append([]string{olmNamespace, f.ns, otherNamespace}, f.targets...) {
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// subscribe creates the OperatorGroup (its target namespaces f.targets, AllNamespaces when
// none) and the Subscription to the package's stable channel with automatic approval.
func (f *flow) subscribe() {
	t := f.t
	og := &operatorsv1.OperatorGroup{
		ObjectMeta: metav1.ObjectMeta{Name: packageName, Namespace: f.ns},
		Spec:       operatorsv1.OperatorGroupSpec{TargetNamespaces: f.targets},
	}
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: packageName, Namespace: f.ns},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource:          catalogSourceName,
			CatalogSourceNamespace: olmNamespace,
			Package:                packageName,
			Channel:                channelName,
			InstallPlanApproval:    operatorsv1alpha1.ApprovalAutomatic,
		},
	}
	for _, obj := range []client.Object{og, sub} {
		if err := f.cl.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// waitInstalled waits until the Subscription has installed version through a completed
// InstallPlan, its CSV is Succeeded, the CSV of replaced (if any) is gone, and the operator's
// Deployment is Available with the version's image.
func (f *flow) waitInstalled(version, replaced string) {
	t := f.t
	name := csvName(version)
	logs := []*localcluster.Process{f.olm, f.catalog}
	eventually(t, 5*time.Minute, "Subscription installs "+name, func(ctx context.Context) (bool, string) {
		sub := &operatorsv1alpha1.Subscription{}
		if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: packageName}, sub); err != nil {
			return false, err.Error()
		}
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, csv); err != nil {
			return false, fmt.Sprintf("subscription state %q current %q installed %q; CSV %s: %v", sub.Status.State, sub.Status.CurrentCSV, sub.Status.InstalledCSV, name, err)
		}
		return sub.Status.InstalledCSV == name && csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded,
			fmt.Sprintf("subscription state %q installed %q; CSV %s phase %s (%s: %s)", sub.Status.State, sub.Status.InstalledCSV, name, csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	}, logs...)

	eventually(t, time.Minute, "InstallPlan of "+name+" Complete", func(ctx context.Context) (bool, string) {
		plans := &operatorsv1alpha1.InstallPlanList{}
		if err := f.cl.List(ctx, plans, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ip := range plans.Items {
			if slices.Contains(ip.Spec.ClusterServiceVersionNames, name) && ip.Status.Phase == operatorsv1alpha1.InstallPlanPhaseComplete {
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s %v %s", ip.Name, ip.Spec.ClusterServiceVersionNames, ip.Status.Phase))
		}
		return false, fmt.Sprintf("InstallPlans %v", seen)
	}, logs...)

	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := f.cl.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, csv); err != nil {
		t.Fatal(err)
	}
	if want := csvName(replaced); replaced != "" && csv.Spec.Replaces != want || replaced == "" && csv.Spec.Replaces != "" {
		t.Errorf("%s replaces %q, want %q", name, csv.Spec.Replaces, want)
	}
	if replaced != "" {
		eventually(t, 2*time.Minute, csvName(replaced)+" removed after the upgrade", func(ctx context.Context) (bool, string) {
			old := &operatorsv1alpha1.ClusterServiceVersion{}
			err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: csvName(replaced)}, old)
			return apierrors.IsNotFound(err), fmt.Sprintf("phase %s: %v", old.Status.Phase, err)
		}, logs...)
	}

	f.installed = version
	image := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Image
	if !strings.HasSuffix(image, ":v"+version) {
		t.Errorf("the CSV of %s runs %s", version, image)
	}
	eventually(t, 2*time.Minute, "operator Deployment rolled out and Available", func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: deploymentName}, d); err != nil {
			return false, err.Error()
		}
		available := false
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				available = true
			}
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return available && d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
				d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want,
			fmt.Sprintf("image %s, replicas %d updated %d available %d (want %d), available %v", d.Spec.Template.Spec.Containers[0].Image,
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, want, available)
	}, logs...)
}

// operatorPod returns a Ready pod of the operator's Deployment with its current template.
func (f *flow) operatorPod(ctx context.Context) (*appsv1.Deployment, *corev1.Pod, error) {
	d := &appsv1.Deployment{}
	if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: deploymentName}, d); err != nil {
		return nil, nil, err
	}
	pods := &corev1.PodList{}
	if err := f.cl.List(ctx, pods, client.InNamespace(f.ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil, nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if ready && p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == d.Spec.Template.Spec.Containers[0].Image {
			return d, p, nil
		}
	}
	return nil, nil, fmt.Errorf("no Ready pod of %s with its current image among %d pods", deploymentName, len(pods.Items))
}

// runOperator runs the operator binary as a pod of the Deployment OLM created would run it:
// the container's arguments (with loopback ports for metrics and probes), its environment
// with the downward-API values resolved from a real pod (WATCH_NAMESPACE from
// olm.targetNamespaces), and a token of the ServiceAccount OLM created.
func (f *flow) runOperator(name string) *localcluster.Process {
	t := f.t
	ctx := t.Context()
	d, pod, err := f.operatorPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pod.Annotations["olm.targetNamespaces"], strings.Join(f.targets, ","); got != want {
		t.Errorf("the operator's pod has olm.targetNamespaces %q, want %q", got, want)
	}
	container := d.Spec.Template.Spec.Containers[0]
	var env []string
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+downwardValue(t, pod, e.ValueFrom.FieldRef.FieldPath))
		default:
			t.Fatalf("the operator's env %s comes from %v, which this test cannot resolve", e.Name, e.ValueFrom)
		}
	}
	ports := testenv.FreePorts(t, 2)
	metricsPort, probePort := ports[0], ports[1]
	var args []string
	for _, a := range container.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort)
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort)
		}
		args = append(args, a)
	}

	cs, err := f.cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(f.ns).CreateToken(ctx, d.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("while creating a token of the operator's ServiceAccount %s: %v", d.Spec.Template.Spec.ServiceAccountName, err)
	}
	f.token = tr.Status.Token
	kubeconfig := filepath.Join(f.logDir, name+".kubeconfig")
	if err := f.cluster.WriteKubeconfig(kubeconfig, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	// In a pod the kubeconfig and the leader election namespace come from the mounted
	// ServiceAccount; here they are given.
	args = append(args, "--kubeconfig="+kubeconfig, "--leader-election-namespace="+f.ns)
	t.Logf("running the operator as the %s pod: %s %s", d.Spec.Template.Spec.Containers[0].Image, strings.Join(env, " "), strings.Join(args, " "))
	p := start(t, f.logDir, name, f.operatorBin, args, env)
	if err := p.WaitFor(time.Minute, func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)) }); err != nil {
		t.Fatal(err)
	}
	// The metrics endpoint authenticates and authorizes callers with TokenReviews and
	// SubjectAccessReviews, which the operator may create only if OLM granted the CSV's
	// clusterPermissions.
	if err := p.WaitFor(30*time.Second, func() error { return metricsOK(metricsPort, localcluster.AdminToken) }); err != nil {
		t.Errorf("the operator's metrics with the RBAC OLM granted: %v", err)
	}
	return p
}

// downwardValue resolves a downward-API field path of the pod, as the kubelet does.
func downwardValue(t *testing.T, pod *corev1.Pod, path string) string {
	t.Helper()
	switch {
	case path == "metadata.name":
		return pod.Name
	case path == "metadata.namespace":
		return pod.Namespace
	case strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']"):
		return pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")]
	case strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']"):
		return pod.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")]
	}
	t.Fatalf("field path %s is not resolved by this test", path)
	return ""
}

// createExamples creates every example of the installed CSV's alm-examples in the target
// namespace, as a user does from the console, and an AppService outside the target
// namespaces. The RedisCluster is paused: its pods would need Redis servers this test does
// not run.
func (f *flow) createExamples() []*unstructured.Unstructured {
	t := f.t
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := f.cl.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: csvName(f.installed)}, csv); err != nil {
		t.Fatal(err)
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	var crs []*unstructured.Unstructured
	for _, ex := range examples {
		u := &unstructured.Unstructured{Object: ex}
		u.SetNamespace(f.appsNS)
		if u.GetKind() == "RedisCluster" {
			if err := unstructured.SetNestedField(u.Object, true, "spec", "pause"); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.cl.Create(t.Context(), u); err != nil {
			t.Fatalf("while creating the example %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		crs = append(crs, u)
	}
	outsider := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.middleware-operator.io/v1", "kind": "AppService",
		"metadata": map[string]any{"name": "outsider", "namespace": otherNamespace},
		"spec":     map[string]any{"image": "nginx:1.27", "size": int64(1)},
	}}
	if err := f.cl.Create(t.Context(), outsider); err != nil {
		t.Fatal(err)
	}
	return crs
}

// reconciled says whether the operator has caught up with a custom resource: the status
// describes the current generation, and AppServices are Available, CloudManagers Ready.
func reconciled(u *unstructured.Unstructured) (bool, string) {
	gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if gen != u.GetGeneration() {
		return false, fmt.Sprintf("%s %s observedGeneration %d, generation %d", u.GetKind(), u.GetName(), gen, u.GetGeneration())
	}
	switch u.GetKind() {
	case "AppService":
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("AppService %s not Available: %v", u.GetName(), conds)
	case "CloudManager":
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Ready", fmt.Sprintf("CloudManager %s phase %q", u.GetName(), phase)
	}
	return true, ""
}

// waitReconciled waits until the operator has reconciled every custom resource.
func (f *flow) waitReconciled(crs []*unstructured.Unstructured, operator *localcluster.Process) {
	for _, cr := range crs {
		eventually(f.t, 3*time.Minute, "reconcile of "+cr.GetKind()+" "+cr.GetName(), func(ctx context.Context) (bool, string) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(cr.GroupVersionKind())
			if err := f.cl.Get(ctx, client.ObjectKeyFromObject(cr), u); err != nil {
				return false, err.Error()
			}
			return reconciled(u)
		}, operator)
	}
}

// checkOutsideUntouched checks the AppService outside the OperatorGroup's target namespace
// got no Deployment and no status: the operator watches only WATCH_NAMESPACE.
func (f *flow) checkOutsideUntouched() {
	t := f.t
	// The outsider was created before the operator started, with the examples it reconciled;
	// give a wrong watch a moment to show.
	time.Sleep(2 * time.Second)
	err := f.cl.Get(t.Context(), client.ObjectKey{Namespace: otherNamespace, Name: "outsider"}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the operator made a Deployment for an AppService outside its target namespace (get: %v)", err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(appServiceGVK)
	if err := f.cl.Get(t.Context(), client.ObjectKey{Namespace: otherNamespace, Name: "outsider"}, u); err != nil {
		t.Fatal(err)
	}
	if st, ok := u.Object["status"]; ok && !reflect.DeepEqual(st, map[string]any{}) {
		t.Errorf("the AppService outside the target namespace has a status: %v", st)
	}
}

var appServiceGVK = schema.GroupVersionKind{Group: "apps.middleware-operator.io", Version: "v1", Kind: "AppService"}

// checkIntact checks every custom resource survived the upgrade: same object, same spec.
func (f *flow) checkIntact(crs []*unstructured.Unstructured) {
	t := f.t
	for _, cr := range crs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(cr.GroupVersionKind())
		if err := f.cl.Get(t.Context(), client.ObjectKeyFromObject(cr), u); err != nil {
			t.Errorf("%s %s after the upgrade: %v", cr.GetKind(), cr.GetName(), err)
			continue
		}
		if u.GetUID() != cr.GetUID() || !reflect.DeepEqual(u.Object["spec"], cr.Object["spec"]) {
			t.Errorf("%s %s changed in the upgrade: uid %s -> %s, spec %v -> %v", cr.GetKind(), cr.GetName(), cr.GetUID(), u.GetUID(), cr.Object["spec"], u.Object["spec"])
		}
	}
}

// checkStillReconciled changes the AppService's size and the CloudManager's front replicas
// and waits for the operator of the new version to carry the changes to their children.
func (f *flow) checkStillReconciled(crs []*unstructured.Unstructured, operator *localcluster.Process) {
	t := f.t
	for _, cr := range crs {
		var patch, child string
		var want int64
		switch {
		case cr.GetKind() == "AppService" && cr.GetName() == "nginx-app":
			patch, child, want = `{"spec":{"size":3}}`, cr.GetName(), 3
		case cr.GetKind() == "CloudManager":
			name, _, _ := unstructured.NestedString(cr.Object, "spec", "front", "deployment", "name")
			patch, child, want = `{"spec":{"front":{"deployment":{"replicas":2}}}}`, name, 2
		default:
			continue
		}
		u := cr.DeepCopy()
		if err := f.cl.Patch(t.Context(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, cr.GetKind()+" "+cr.GetName()+" change reaches its Deployment", func(ctx context.Context) (bool, string) {
			d := &appsv1.Deployment{}
			if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.appsNS, Name: child}, d); err != nil {
				return false, err.Error()
			}
			return int64(ptr.Deref(d.Spec.Replicas, 0)) == want && int64(d.Status.AvailableReplicas) == want,
				fmt.Sprintf("Deployment %s replicas %d available %d, want %d", child, ptr.Deref(d.Spec.Replicas, 0), d.Status.AvailableReplicas, want)
		}, operator)
	}
	f.waitReconciled(crs, operator)
}

// uninstall deletes the Subscription, the CSVs (OLM then removes the operator's Deployment
// and RBAC and the copied CSVs), the OperatorGroup and the CatalogSource, while olm still
// runs to remove the CSVs' finalizers.
func (f *flow) uninstall() {
	t := f.t
	started := time.Now()
	defer func() {
		t.Logf("%-62s %6.1fs", "uninstalled: CSVs, Deployment and copied CSVs removed by OLM", time.Since(started).Seconds())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	del := func(obj client.Object) {
		if err := f.cl.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstall: while deleting %T %s: %v", obj, obj.GetName(), err)
		}
	}
	del(&operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: packageName}})
	var left []string
	for ctx.Err() == nil {
		left = nil
		for _, ns := range append([]string{f.ns}, f.targets...) {
			csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
			if err := f.cl.List(ctx, csvs, client.InNamespace(ns)); err != nil {
				left = append(left, fmt.Sprintf("CSVs in %s (%v)", ns, err))
				continue
			}
			for i, c := range csvs.Items {
				left = append(left, fmt.Sprintf("CSV %s/%s (%s, deleting since %v, finalizers %v)", ns, c.Name, c.Status.Phase, c.DeletionTimestamp, c.Finalizers))
				if ns == f.ns && c.DeletionTimestamp == nil {
					del(&csvs.Items[i]) // OLM removes the copies in the target namespaces
				}
			}
		}
		d := &appsv1.Deployment{}
		if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: deploymentName}, d); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("Deployment %s (%v)", deploymentName, err))
		}
		if len(left) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("uninstall: still there after deleting the CSVs: %v (olm exited: %v)\n%s", left, f.olm.Exited(), f.olm.LogTail(15))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del(&operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: packageName}})
	del(&operatorsv1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: olmNamespace, Name: catalogSourceName}})
}
