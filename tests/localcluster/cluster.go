package localcluster

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configures a local cluster. The zero value gives one node and a temporary directory.
type Options struct {
	// Nodes is the number of fake kwok nodes (default 1). Each is spread over three zones.
	Nodes int
	// PodsPerNode is each node's pod allocatable (default 1000, so benchmarks never stall on
	// Pending pods).
	PodsPerNode int
	// Dir holds certificates, data and logs. Empty means a new temporary directory that Stop
	// removes.
	Dir string
	// BinDir holds the binaries `make tools` links. Empty means $MWO_BIN_DIR, else the bin/
	// folder of the repository that contains the working directory.
	BinDir string
	// ObjectStore also starts an S3-compatible object store (see ObjectStore), as the
	// component "objectstore".
	ObjectStore bool
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
	// Profiling serves kube-apiserver's /debug/pprof (off by default: it costs nothing
	// idle, but nothing else needs it).
	Profiling bool
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir holds the cluster's files; Kubeconfig is the admin kubeconfig inside it.
	Dir, Kubeconfig string
	// Config is an admin REST config.
	Config *rest.Config
	// Nodes are the names of the kwok nodes.
	Nodes []string
	// Ports are the loopback ports each component listens on, by component name.
	Ports map[string]int
	// ObjectStore is the running object store with Options.ObjectStore, else nil.
	ObjectStore *ObjectStore

	ownDir    bool
	procs     []*process
	logf      func(string, ...any)
	podRange  string   // the pod addresses kwok gives out
	rangeLock *os.File // holds podRange while the cluster runs
	// stopResizer ends the stand-in volume resizer (resizer.go).
	stopResizer func()
}

// AdminToken is the static bearer token of the cluster-admin user (group system:masters).
const AdminToken = "middleware-operator-local-admin"

// Start brings up etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// creates the nodes and waits until they are Ready. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts = withDefaults(opts)
	c = &Cluster{Dir: opts.Dir, ownDir: opts.Dir == "", logf: opts.Logf}
	if c.ownDir {
		if c.Dir, err = os.MkdirTemp("", "mwo-cluster-"); err != nil {
			return nil, err
		}
	} else if err = os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return c, err
	}
	started := time.Now()
	pki, err := newPKI(c.Dir)
	if err != nil {
		return c, err
	}
	c.Ports = map[string]int{}
	if opts.ObjectStore {
		if err = c.onFreePorts(func(p []int) error { return c.startObjectStore(ctx, bin, p[0]) }, "objectstore"); err != nil {
			return c, err
		}
		c.logf("object store ready at %s after %s", c.ObjectStore.Endpoint, time.Since(started).Round(time.Millisecond))
	}
	if err = c.onFreePorts(func(p []int) error { return c.startEtcd(bin, p[0], p[1]) }, "etcd", "etcd-peer"); err != nil {
		return c, err
	}
	if err = c.onFreePorts(func(p []int) error {
		return c.startAPIServer(bin, pki, c.Ports["etcd"], p[0], opts.Profiling)
	}, "kube-apiserver"); err != nil {
		return c, err
	}
	c.logf("kube-apiserver ready at %s after %s", c.Config.Host, time.Since(started).Round(time.Millisecond))
	if err = c.onFreePorts(func(p []int) error { return c.startControllerManager(bin, pki, p[0]) }, "kube-controller-manager"); err != nil {
		return c, err
	}
	if err = c.onFreePorts(func(p []int) error { return c.startScheduler(bin, p[0]) }, "kube-scheduler"); err != nil {
		return c, err
	}
	if err = c.onFreePorts(func(p []int) error { return c.startKwok(bin, p[0]) }, "kwok"); err != nil {
		return c, err
	}
	if err = c.createNodes(ctx, opts); err != nil {
		return c, err
	}
	if err = c.createStorageClasses(ctx); err != nil {
		return c, err
	}
	if err = c.startResizer(); err != nil {
		return c, err
	}
	if err = c.waitNodesReady(ctx, time.Minute); err != nil {
		return c, err
	}
	if err = c.WaitForDefaultServiceAccount(ctx, "default"); err != nil {
		return c, err
	}
	if err = c.warmPodIPPool(ctx); err != nil {
		return c, err
	}
	c.logf("local cluster ready after %s (dir %s)", time.Since(started).Round(time.Millisecond), c.Dir)
	return c, nil
}

func withDefaults(o Options) Options {
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.PodsPerNode <= 0 {
		o.PodsPerNode = 1000
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Stop ends every component, newest first, and removes a temporary directory. It is safe to
// call more than once.
func (c *Cluster) Stop() {
	if c.stopResizer != nil {
		c.stopResizer()
		c.stopResizer = nil
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	c.procs = nil
	if c.rangeLock != nil {
		_ = c.rangeLock.Close()
		c.rangeLock = nil
	}
	if c.ownDir && c.Dir != "" && os.Getenv("MWO_KEEP_CLUSTER_DIR") == "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// PIDs returns the process ids of the running components, for tests that check teardown.
func (c *Cluster) PIDs() map[string]int {
	pids := map[string]int{}
	for _, p := range c.procs {
		pids[p.name] = p.cmd.Process.Pid
	}
	return pids
}

// Halt stops the component name (SIGTERM, then SIGKILL after 10 s) and leaves it down until
// Resume: tests stage outages with it, such as the API server gone for a minute.
func (c *Cluster) Halt(name string) error {
	p, err := c.process(name)
	if err != nil {
		return err
	}
	p.stop(10 * time.Second)
	return nil
}

// Resume starts a halted component again, with the same flags, data and log, and waits up
// to 90 s until it serves.
func (c *Cluster) Resume(name string) error {
	p, err := c.process(name)
	if err != nil {
		return err
	}
	if !p.exited() {
		return fmt.Errorf("%s is running", name)
	}
	np, err := p.again()
	if err != nil {
		return err
	}
	c.procs[slices.Index(c.procs, p)] = np
	if np.ready == nil {
		return nil
	}
	return np.waitFor(90*time.Second, np.ready)
}

// process finds the component name.
func (c *Cluster) process(name string) (*process, error) {
	for _, p := range c.procs {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("the local cluster has no component %q", name)
}

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.Config)
}

func (c *Cluster) start(name, bin string, args []string) (*process, error) {
	p, err := startProcess(name, bin, filepath.Join(c.Dir, name+".log"), args, nil)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *Cluster) startEtcd(bin string, port, peerPort int) error {
	client := "http://127.0.0.1:" + strconv.Itoa(port)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := c.start("etcd", filepath.Join(bin, "etcd"), []string{
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync=true", "--quota-backend-bytes=8589934592", "--log-level=warn",
	})
	if err != nil {
		return err
	}
	return p.waitFor(30*time.Second, func() error { return httpOK(nil, client+"/health", "") })
}

func (c *Cluster) startAPIServer(bin string, p *pki, etcdPort, port int, profiling bool) error {
	tokens := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(AdminToken+",admin,admin-uid,\"system:masters\"\n"), 0o600); err != nil {
		return err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	proc, err := c.start("kube-apiserver", filepath.Join(bin, "kube-apiserver"), []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--token-auth-file=" + tokens,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPublic, "--service-account-signing-key-file=" + p.SAPrivate,
		"--service-cluster-ip-range=10.0.0.0/16", // room for 65,000 Services: benchmarks create thousands
		"--requestheader-client-ca-file=" + p.FrontProxyCA,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.FrontProxyClient, "--proxy-client-key-file=" + p.FrontProxyKey,
		"--enable-aggregator-routing=true",
		"--profiling=" + strconv.FormatBool(profiling),
	})
	if err != nil {
		return err
	}
	c.Config = &rest.Config{Host: host, BearerToken: AdminToken, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM}}
	tlsConf := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // readiness probe of our own loopback server
	proc.ready = func() error { return httpOK(tlsConf, host+"/readyz", AdminToken) }
	if err := proc.waitFor(90*time.Second, proc.ready); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return writeKubeconfig(c.Kubeconfig, host, p.caPEM, AdminToken)
}

// controllerFlags are the flags kube-controller-manager and kube-scheduler share.
func (c *Cluster) controllerFlags(port int, certDir string) []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1", "--leader-elect=false",
		"--secure-port=" + strconv.Itoa(port), "--cert-dir=" + filepath.Join(c.Dir, certDir),
		"--kube-api-qps=200", "--kube-api-burst=400",
	}
}

// waitHealthy waits until the component's secure port answers /healthz.
func waitHealthy(p *process, port int) error {
	tlsConf := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health probe of our own loopback server
	return p.waitFor(60*time.Second, func() error {
		return httpOK(tlsConf, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), "")
	})
}

func (c *Cluster) startControllerManager(bin string, p *pki, port int) error {
	kcm, err := c.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), append([]string{
		// Pod IPs here are loopback addresses (real processes stand in for pods), which
		// Endpoints and EndpointSlices reject: their controllers would only fill the event
		// stream with Warnings. Without them Services have no endpoint objects; nothing
		// here routes through a Service (there is no kube-proxy), so nothing else is lost.
		// kwok binds claims to fake volumes itself (its pvc-provision stage); the
		// PersistentVolume binder raced it and reported ClaimLost and ProvisioningFailed for
		// claims that were fine, so it is left out too: claims of a StorageClass that kwok
		// does not serve (see StorageClasses) stay Pending here.
		"--controllers=*,-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller,-persistentvolume-binder-controller",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.SAPrivate, "--root-ca-file=" + p.CACert,
		"--cluster-signing-cert-file=" + p.CACert, "--cluster-signing-key-file=" + p.CAKey,
		"--node-monitor-grace-period=60s",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--concurrent-statefulset-syncs=10",
		"--concurrent-gc-syncs=40",
	}, c.controllerFlags(port, "kcm-certs")...))
	if err != nil {
		return err
	}
	return waitHealthy(kcm, port)
}

func (c *Cluster) startScheduler(bin string, port int) error {
	sched, err := c.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"), c.controllerFlags(port, "scheduler-certs"))
	if err != nil {
		return err
	}
	return waitHealthy(sched, port)
}

// onFreePorts draws a free port for each name, runs start on them and records them in
// c.Ports. When the component start launched exits because another process bound one of
// its ports first (the ports are drawn, then bound by the component a moment later, and
// every test's servers draw from the same range: CI met a kube-scheduler failing so), it
// stops what this try started and draws again, up to three times.
func (c *Cluster) onFreePorts(start func(ports []int) error, names ...string) error {
	for try := 1; ; try++ {
		ports, err := freePorts(len(names))
		if err != nil {
			return err
		}
		before := len(c.procs)
		err = start(ports)
		if err == nil {
			for i, name := range names {
				c.Ports[name] = ports[i]
			}
			return nil
		}
		if !errors.Is(err, errPortTaken) || try == 3 {
			return err
		}
		c.logf("%s: %v; drawing other ports", names[0], err)
		for _, p := range c.procs[before:] {
			p.stop(10 * time.Second)
		}
		c.procs = c.procs[:before]
	}
}

func findBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("MWO_BIN_DIR")
	}
	if dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "bin", "kube-apiserver")); err == nil {
			return filepath.Join(d, "bin"), nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no bin/kube-apiserver above the working directory: run `make tools` or set MWO_BIN_DIR")
		}
	}
}

func httpOK(tlsConf *tls.Config, url, token string) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func writeKubeconfig(path, host string, ca []byte, token string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
`, host, base64.StdEncoding.EncodeToString(ca), token)
	return os.WriteFile(path, []byte(content), 0o600)
}
