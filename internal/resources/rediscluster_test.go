package resources_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

func redisCluster(volumes *redisv1alpha1.Volumes) *redisv1alpha1.RedisCluster {
	return &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"},
		Spec: redisv1alpha1.RedisClusterSpec{
			Replicas: 6,
			Pod:      []redisv1alpha1.PodSpec{{Volumes: volumes}},
		},
	}
}

func TestRedisStatefulSetRedisContainer(t *testing.T) {
	cases := map[string]struct {
		volumes        *redisv1alpha1.Volumes
		dataSubPathExp string
		dataVolume     bool // the data volume is in the pod template, not a claim template
	}{
		"pvc (default)": {},
		"hostPath":      {volumes: &redisv1alpha1.Volumes{Type: "hostPath"}, dataSubPathExp: "$(POD_NAME)", dataVolume: true},
		"nfs":           {volumes: &redisv1alpha1.Volumes{Type: "nfs", PersistentVolumeClaimName: "shared"}, dataSubPathExp: "$(POD_NAME)", dataVolume: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sts := resources.RedisStatefulSet(redisCluster(tc.volumes), 6)
			spec := sts.Spec.Template.Spec
			c := spec.Containers[0]
			if c.Name != resources.RedisContainer {
				t.Fatalf("first container %q, want %q", c.Name, resources.RedisContainer)
			}
			if want := []string{"sh", "-c", resources.RedisStartScript, "redis-server"}; !reflect.DeepEqual(c.Command, want) {
				t.Errorf("command %q, want %q", c.Command, want)
			}
			wantArgs := []string{
				"/etc/redis/redis.conf",
				"--cluster-announce-ip", "$(POD_IP)",
				"--include", "/run/redis-auth/auth.conf", // the password, written by the start script
			}
			if !reflect.DeepEqual(c.Args, wantArgs) {
				t.Errorf("args %q, want %q", c.Args, wantArgs)
			}
			wantMounts := []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/redis"},
				{Name: "data", MountPath: "/data", SubPathExpr: tc.dataSubPathExp},
				{Name: "members", MountPath: "/etc/redis-members", ReadOnly: true},
				{Name: "auth", MountPath: "/run/redis-auth"},
				{Name: "password", MountPath: "/etc/redis-password", ReadOnly: true}, // the Secret, refreshed on a rotation
			}
			if !reflect.DeepEqual(c.VolumeMounts, wantMounts) {
				t.Errorf("mounts %+v, want %+v", c.VolumeMounts, wantMounts)
			}
			inMemory := false
			for _, v := range spec.Volumes {
				inMemory = inMemory || (v.Name == "auth" && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory)
			}
			if !inMemory {
				t.Errorf("no in-memory emptyDir named auth for the password file: %+v", spec.Volumes)
			}
			if !hasEnvFieldRef(c.Env, "POD_NAME", "metadata.name") {
				t.Errorf("env %+v lacks POD_NAME from metadata.name, which the start script reads", c.Env)
			}

			volumes := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v
			}
			wantMembers := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cache-members"}, Optional: ptr.To(true),
			}}
			if got := volumes["members"].VolumeSource; !reflect.DeepEqual(got, wantMembers) {
				t.Errorf("members volume %+v, want %+v", got, wantMembers)
			}
			if got := volumes["config"].ConfigMap; got == nil || got.Name != "cache-config" {
				t.Errorf("config volume %+v, want ConfigMap cache-config", volumes["config"])
			}
			if _, ok := volumes["data"]; ok != tc.dataVolume {
				t.Errorf("data volume in the template: %v, want %v", ok, tc.dataVolume)
			}
			if claims := len(sts.Spec.VolumeClaimTemplates); (claims == 1) == tc.dataVolume {
				t.Errorf("%d volume claim templates with data volume in the template %v", claims, tc.dataVolume)
			}
		})
	}
}

func hasEnvFieldRef(env []corev1.EnvVar, name, path string) bool {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path {
			return true
		}
	}
	return false
}

func TestRedisStartScript(t *testing.T) {
	// Behaviour is covered by tests/redispods, which runs the script; here, what the kubelet
	// and the operator rely on.
	for _, want := range []string{
		`member="/etc/redis-members/$POD_NAME"`,
		`[ ! -s /data/nodes.conf ]`,
		"has no cluster state",
		`exec redis-server "$@"`,
	} {
		if script := resources.RedisStartScript; !strings.Contains(script, want) {
			t.Errorf("RedisStartScript lacks %q:\n%s", want, resources.RedisStartScript)
		}
	}
	// The kubelet expands $(VAR) and turns $$ into $ in a command.
	for _, bad := range []string{"$(", "$$"} {
		if script := resources.RedisStartScript; strings.Contains(script, bad) {
			t.Errorf("RedisStartScript contains %q, which the kubelet would expand", bad)
		}
	}
}

// TestRedisStartScriptPassesThePasswordThroughAFile runs the start script with a password
// that needs quoting, in front of a stand-in redis-server that records its arguments and
// environment and then starts the real one with the same arguments: the password is in
// neither, and the real server requires exactly it.
func TestRedisStartScriptPassesThePasswordThroughAFile(t *testing.T) {
	const password = `p"a\ss 'w$rd`
	srv := runStartScript(t, resources.RedisStartScript, map[string]string{resources.RedisPasswordFile: password})
	srv.waitFor(t, password)
	if out := srv.cli("", "ping"); !strings.Contains(out, "NOAUTH") {
		t.Errorf("the server answers without the password: %s", out)
	}
	if out := srv.cli(password, "config", "get", "masterauth"); !strings.Contains(out, password) {
		t.Errorf("masterauth is not the password: %s", out)
	}
	srv.assertNoSecretPassed(t, password)
}

// TestRedisStartScriptDropsOneFinalLineEnding: a password file written by echo (LF) or on
// Windows (CR LF) starts a server that requires the password without it, the password
// resources.RedisPassword finds in the same value.
func TestRedisStartScriptDropsOneFinalLineEnding(t *testing.T) {
	for name, ending := range map[string]string{"LF": "\n", "CR LF": "\r\n"} {
		t.Run(name, func(t *testing.T) {
			const password = `p"a\ss w$rd`
			want, err := resources.RedisPassword([]byte(password + ending))
			if err != nil || want != password {
				t.Fatalf("RedisPassword: %q, %v; want %q", want, err, password)
			}
			srv := runStartScript(t, resources.RedisStartScript, map[string]string{resources.RedisPasswordFile: password + ending})
			srv.waitFor(t, password)
			if out := srv.cli(password+ending, "ping"); out == "PONG" {
				t.Errorf("the server accepts the password with its line ending")
			}
		})
	}
}

// scriptServer is a redis-server started by a start script under test, through a stand-in
// that records the arguments and environment it was given.
type scriptServer struct {
	dir, port string
}

// runStartScript runs script (a start script) with files (path in the pod -> content) at
// paths in a temporary directory, in front of a stand-in redis-server that records its
// arguments and environment and then starts the real one, standalone, with the same
// arguments. env is more of the script's environment (NAME=value).
func runStartScript(t *testing.T, script string, files map[string]string, env ...string) *scriptServer {
	t.Helper()
	real := redisServerBinary(t)
	srv := &scriptServer{dir: t.TempDir(), port: strconv.Itoa(testenv.FreePorts(t, 1)[0])}
	stub := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + srv.dir + "/args\nenv > " + srv.dir + "/env\n" +
		"exec " + real + " --port " + srv.port + " --save '' --appendonly no --dir " + srv.dir + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(srv.dir, "redis-server"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	script = strings.ReplaceAll(script, resources.RedisAuthFile, srv.dir+"/auth.conf")
	for path, content := range files {
		local := srv.dir + "/" + strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_")
		if err := os.WriteFile(local, []byte(content), 0o400); err != nil {
			t.Fatal(err)
		}
		script = strings.ReplaceAll(script, path, local)
	}
	cmd := exec.Command("sh", "-c", script, "redis-server", "--include", srv.dir+"/auth.conf")
	cmd.Env = append([]string{"PATH=" + srv.dir + ":/usr/bin:/bin", "POD_NAME=cache-0"}, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return srv
}

// cli runs redis-cli against the server as the default user with password ("" for none)
// and returns its output.
func (s *scriptServer) cli(password string, args ...string) string {
	base := []string{"-p", s.port, "--no-auth-warning"}
	if password != "" {
		base = append(base, "--pass", password)
	}
	out, _ := exec.Command("redis-cli", append(base, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// waitFor waits until the server answers PING as the default user with password.
func (s *scriptServer) waitFor(t *testing.T, password string) {
	t.Helper()
	var out string
	for range 50 {
		if out = s.cli(password, "ping"); out == "PONG" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the server does not accept the default user's password: %s", out)
}

// assertNoSecretPassed checks that no secret is in redis-server's arguments or environment
// and that the auth file is private.
func (s *scriptServer) assertNoSecretPassed(t *testing.T, secrets ...string) {
	t.Helper()
	for _, f := range []string{"args", "env"} {
		data, err := os.ReadFile(filepath.Join(s.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range secrets {
			if strings.Contains(string(data), secret) {
				t.Errorf("redis-server's %s hold a password:\n%s", f, data)
			}
		}
	}
	if info, err := os.Stat(s.dir + "/auth.conf"); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("auth file: %v, mode %v, want 0600", err, info.Mode().Perm())
	}
}

func TestRedisMembersConfigMap(t *testing.T) {
	rc := redisCluster(nil)
	members := map[string]string{"cache-0": "0123abcd", "cache-1": "4567ef01"}
	cm := resources.RedisMembersConfigMap(rc, members)
	if cm.Name != "cache-members" || cm.Name != resources.RedisMembersConfigMapName(rc) || cm.Namespace != "ns" {
		t.Errorf("name %s/%s, want ns/cache-members", cm.Namespace, cm.Name)
	}
	if !reflect.DeepEqual(cm.Data, members) {
		t.Errorf("data %v, want %v", cm.Data, members)
	}
	if want := resources.RedisConfigMap(rc, "").Labels; !reflect.DeepEqual(cm.Labels, want) {
		t.Errorf("labels %v, want %v (those of the other children)", cm.Labels, want)
	}
}

// TestRedisReadinessScript runs the probe with sh against a stand-in redis-cli that prints
// what a real one prints for each state of a node.
func TestRedisReadinessScript(t *testing.T) {
	cases := map[string]struct {
		cluster, replication string
		ready                bool
	}{
		"a master in a cluster":               {"cluster_state:ok\r\ncluster_known_nodes:6\r\n", "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n", true},
		"a fresh node that knows only itself": {"cluster_state:fail\r\ncluster_known_nodes:1\r\n", "role:master\r\n", false},
		"a replica with its link up":          {"cluster_known_nodes:12\r\n", "role:slave\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n", true},
		"a replica in its first full sync":    {"cluster_known_nodes:6\r\n", "role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:1\r\n", false},
		"a replica whose master is gone":      {"cluster_known_nodes:6\r\n", "role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\n", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			// The stand-in takes the password on its standard input with --askpass only,
			// and fails if it finds it in its arguments or environment.
			fake := "#!/bin/sh\ncase \"$*\" in *--askpass*) read -r pw;; *) echo NOAUTH; exit 1;; esac\n" +
				"[ \"$pw\" = secret ] || { echo WRONGPASS; exit 1; }\n" +
				"env | grep -q secret && { echo 'the password is in the environment'; exit 1; }\n" +
				"case \"$*\" in *secret*) echo 'the password is in the arguments'; exit 1;; esac\n" +
				"case \"$*\" in *cluster*) printf '" + tc.cluster + "';; *replication*) printf '" + tc.replication + "';; esac\n"
			if err := os.WriteFile(filepath.Join(dir, "redis-cli"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "password"), []byte("secret"), 0o400); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", strings.ReplaceAll(resources.RedisReadinessScript, resources.RedisPasswordFile, dir+"/password"))
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ready {
				t.Errorf("ready = %v (%v, %s), want %v", err == nil, err, out, tc.ready)
			}
		})
	}
}

// TestRedisStartScriptRefusesToStartWithoutAPassword: with no password file (an empty or
// missing Secret volume), the script exits before redis-server runs, so no node ever runs
// without a password.
func TestRedisStartScriptRefusesToStartWithoutAPassword(t *testing.T) {
	dir := t.TempDir()
	stub := "#!/bin/sh\ntouch " + dir + "/started\n"
	if err := os.WriteFile(filepath.Join(dir, "redis-server"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]*string{"missing": nil, "empty": new(string)} {
		if content != nil {
			if err := os.WriteFile(filepath.Join(dir, "password"), []byte(*content), 0o400); err != nil {
				t.Fatal(err)
			}
		}
		script := strings.ReplaceAll(resources.RedisStartScript, resources.RedisAuthFile, dir+"/auth.conf")
		script = strings.ReplaceAll(script, resources.RedisPasswordFile, dir+"/password")
		cmd := exec.Command("sh", "-c", script, "redis-server")
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "POD_NAME=cache-0"}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "password file") {
			t.Errorf("%s password file: the script ended with %v: %s; want a failure naming the password file", name, err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			t.Errorf("%s password file: redis-server was started", name)
		}
	}
}

// TestRedisExporterPortIsOnTheHeadlessServiceOnly: with monitorImage the pods get the
// exporter sidecar, each pod's exporter is reachable through the headless Service (one
// scrape target per pod), and the client Service still offers only Redis; without it there
// is no exporter at all.
func TestRedisExporterPortIsOnTheHeadlessServiceOnly(t *testing.T) {
	portNames := func(svc *corev1.Service) []string {
		var names []string
		for _, p := range svc.Spec.Ports {
			names = append(names, p.Name)
		}
		return names
	}
	for _, monitor := range []string{"", "oliver006/redis_exporter:v1.62.0"} {
		rc := redisCluster(nil)
		rc.Spec.Pod[0].MonitorImage = monitor
		headless, client := portNames(resources.RedisHeadlessService(rc)), portNames(resources.RedisClientService(rc))
		containers := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec.Containers
		wantHeadless := []string{"redis", "bus"}
		if monitor != "" {
			wantHeadless = append(wantHeadless, "metrics")
		}
		if !reflect.DeepEqual(headless, wantHeadless) || !reflect.DeepEqual(client, []string{"redis"}) {
			t.Errorf("monitorImage %q: headless ports %v (want %v), client ports %v (want [redis])", monitor, headless, wantHeadless, client)
		}
		if hasExporter := len(containers) == 2 && containers[1].Name == "exporter"; hasExporter != (monitor != "") {
			t.Errorf("monitorImage %q: %d containers", monitor, len(containers))
		}
	}
}

// TestRedisExporterReadsThePasswordFromAFile: the exporter sidecar gets no password in its
// arguments or environment; it reads redis_exporter's password file from the applied-password
// Secret, whose key maps exactly the address it scrapes to the password, and its readiness
// probe asks it to read the file again, so it follows a rotation without a restart.
func TestRedisExporterReadsThePasswordFromAFile(t *testing.T) {
	rc := redisCluster(nil)
	rc.Spec.Pod[0].MonitorImage = "oliver006/redis_exporter:v1.62.0"
	spec := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec
	exporter := spec.Containers[1]
	if len(exporter.Command) != 0 || len(exporter.Args) != 0 {
		t.Errorf("command %q args %q: want the image's entrypoint alone", exporter.Command, exporter.Args)
	}
	env := map[string]string{}
	for _, e := range exporter.Env {
		if e.ValueFrom != nil {
			t.Errorf("env %s comes from %+v: no value of the exporter's environment may come from a Secret", e.Name, e.ValueFrom)
		}
		env[e.Name] = e.Value
	}
	if want := map[string]string{"REDIS_ADDR": "redis://localhost:6379", "REDIS_PASSWORD_FILE": "/etc/redis-exporter/password-file.json"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env %v, want %v", env, want)
	}
	if want := []corev1.VolumeMount{{Name: "exporter-auth", MountPath: "/etc/redis-exporter", ReadOnly: true}}; !reflect.DeepEqual(exporter.VolumeMounts, want) {
		t.Errorf("mounts %+v, want %+v", exporter.VolumeMounts, want)
	}
	var volume *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "exporter-auth" {
			volume = &spec.Volumes[i]
		}
	}
	if volume == nil || volume.Secret == nil || volume.Secret.SecretName != "cache-password-applied" ||
		!reflect.DeepEqual(volume.Secret.Items, []corev1.KeyToPath{{Key: resources.RedisExporterPasswordFileKey, Path: "password-file.json"}}) ||
		ptr.Deref(volume.Secret.DefaultMode, 0) != 0o440 {
		t.Errorf("volume exporter-auth %+v: want the applied-password Secret's exporter key as password-file.json, mode 0440", volume)
	}
	probe := exporter.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/-/reload" || probe.HTTPGet.Port.IntValue() != resources.RedisExporterPort || probe.PeriodSeconds != 10 {
		t.Errorf("readiness probe %+v: want GET /-/reload on 9121 every 10 s", probe)
	}

	// The file is redis_exporter's format: a JSON object from the scraped address to the
	// password, whatever characters the password has.
	const password = "p\"a\\ss 'w$rd\n{}"
	secret := resources.RedisAppliedPasswordSecret(rc, "cache-password-applied", password, "", time.Time{})
	var file map[string]string
	if err := json.Unmarshal(secret.Data[resources.RedisExporterPasswordFileKey], &file); err != nil {
		t.Fatalf("the exporter's password file is not JSON: %v", err)
	}
	if want := map[string]string{env["REDIS_ADDR"]: password, resources.RedisExporterTLSAddr: password, resources.RedisExporterSocketAddr: password}; !reflect.DeepEqual(file, want) {
		t.Errorf("password file %q, want %q", file, want)
	}
	if string(secret.Data[resources.RedisPasswordKey]) != password {
		t.Errorf("the record's password %q, want %q", secret.Data[resources.RedisPasswordKey], password)
	}

	// Without an exporter, no exporter volume.
	rc.Spec.Pod[0].MonitorImage = ""
	for _, v := range resources.RedisStatefulSet(rc, 6).Spec.Template.Spec.Volumes {
		if v.Name == "exporter-auth" {
			t.Error("a pod without an exporter mounts its password file")
		}
	}
}

// redisServerBinary is the path of redis-server; the test skips without one, except in CI.
func redisServerBinary(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is needed by this test (make setup installs it): %v", err)
		}
		t.Skip("redis-server is not installed")
	}
	return real
}
