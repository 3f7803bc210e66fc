package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartCertManager installs cert-manager's CRDs in the cluster and runs its controllers for
// CA and SelfSigned issuers (`make tools` builds cert-manager-controller from cert-manager's
// Go module) until the test ends; its log goes to cert-manager.log in the cluster's folder.
func (e *Env) StartCertManager(t *testing.T) {
	t.Helper()
	bin := Tool(t, "cert-manager-controller")
	crds, err := filepath.EvalSymlinks(Tool(t, "cert-manager-crds"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(e.Cluster.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true, MaxTime: crdWait}); err != nil {
		t.Fatalf("while installing cert-manager's CRDs: %v", err)
	}
	logPath := filepath.Join(e.Cluster.Dir, "cert-manager.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-kubeconfig="+e.Cluster.Kubeconfig, "-cluster-resource-namespace=default")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				t.Logf("cert-manager's log (last 3000 bytes):\n%s", out[max(0, len(out)-3000):])
			}
		}
	})
}
