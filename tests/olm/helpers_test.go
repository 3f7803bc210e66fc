package olm

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// binPath is a program `make tools` links into bin/ (or $MWO_BIN_DIR).
func binPath(t *testing.T, name string) string { return testenv.Tool(t, name) }

// start runs a program next to the cluster, logging to <dir>/<name>.log, and stops it when
// the test ends (unless stopped before).
func start(t *testing.T, dir, name, bin string, args, env []string) *localcluster.Process {
	t.Helper()
	p, err := localcluster.StartProcess(name, bin, filepath.Join(dir, name+".log"), args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(20 * time.Second) })
	return p
}

// requirePortFree fails the test when something already listens on port: olm and catalog
// bind fixed ports.
func requirePortFree(t *testing.T, port int, who string) {
	t.Helper()
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("%s binds the fixed port %d, which is taken on this machine: %v", who, port, err)
	}
	_ = l.Close()
}

// httpOK reports whether GET url answers 200.
func httpOK(url string) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health of a local process with a self-signed certificate
	}}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// metricsOK reports whether the operator's HTTPS metrics endpoint serves its metrics to a
// caller with token.
func metricsOK(port int, token string) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed serving certificate
	}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "# TYPE") {
		return fmt.Errorf("GET /metrics: %s, %d bytes", resp.Status, len(body))
	}
	return nil
}

// tcpOpen reports whether something accepts connections on the loopback port.
func tcpOpen(port int) error {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// selfSignedCert writes a certificate and key for localhost, for the catalog operator's
// metrics server.
func selfSignedCert(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// kubectl runs the project's kubectl against the cluster.
func kubectl(t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	cmd := exec.Command(binPath(t, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// eventually polls cond every 250ms until it returns true or timeout passes, then fails the
// test with the last message cond gave and, to tell why, the last lines of the logs of the
// processes given.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string), logs ...*localcluster.Process) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, msg := cond(ctx)
		last = msg
		return ok, nil
	})
	if err != nil {
		var tails strings.Builder
		for _, p := range logs {
			fmt.Fprintf(&tails, "\n--- last log lines of pid %d:\n%s", p.Pid(), p.LogTail(15))
		}
		t.Fatalf("%s: not after %s: %s%s", what, timeout, last, tails.String())
	}
}

// writeCatalog writes a File-Based Catalog that holds only the given bundles of catalog/ (by
// version, oldest first) in a stable channel where each replaces the one before, as the
// catalog looked when those were the released versions.
func writeCatalog(t *testing.T, dir string, versions ...string) {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "catalog", packageName)
	dst := filepath.Join(dir, packageName)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"package.yaml"}
	channel := "schema: olm.channel\npackage: " + packageName + "\nname: " + channelName + "\nentries:\n"
	for i, v := range versions {
		files = append(files, "bundle-v"+v+".yaml")
		channel += "- name: " + csvName(v) + "\n"
		if i > 0 {
			channel += "  replaces: " + csvName(versions[i-1]) + "\n"
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatalf("catalog/ lacks %s (make catalog): %v", f, err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "channel-"+channelName+".yaml"), []byte(channel), 0o644); err != nil {
		t.Fatal(err)
	}
}

// csvName is the CSV name of a version of the package.
func csvName(version string) string { return packageName + ".v" + version }

// phase logs how long a step of the flow took.
type phase struct {
	t     *testing.T
	start time.Time
	last  time.Time
}

func newPhase(t *testing.T) *phase { now := time.Now(); return &phase{t: t, start: now, last: now} }

func (p *phase) done(what string) {
	now := time.Now()
	p.t.Logf("%-62s %6.1fs (total %6.1fs)", what, now.Sub(p.last).Seconds(), now.Sub(p.start).Seconds())
	p.last = now
}
