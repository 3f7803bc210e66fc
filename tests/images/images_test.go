package images

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// The tags the test gives the images, so it sees that IMG, BUNDLE_IMG and CATALOG_IMG reach
// the tarballs.
const (
	operatorRef = "example.com/mwo/operator:test"
	bundleRef   = "example.com/mwo/bundle:test"
	catalogRef  = "example.com/mwo/catalog:test"
)

var imagesDir string

func TestMain(m *testing.M) {
	var err error
	if imagesDir, err = os.MkdirTemp("", "mwo-images-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(imagesDir)
	os.Exit(code)
}

// makeImages runs `make images` once for the package, into a directory of its own. The tools
// are the suite's already (make test builds them; -o skips their target).
var makeImages = sync.OnceValues(func() ([]byte, error) {
	cmd := exec.Command("make", "-o", "images-tools", "images", "IMAGES_DIR="+imagesDir,
		"IMG="+operatorRef, "BUNDLE_IMG="+bundleRef, "CATALOG_IMG="+catalogRef)
	cmd.Dir = testenv.RepoRoot()
	return cmd.CombinedOutput()
})

// report is what `imagetar inspect` prints: the image as go-containerregistry reads it.
type report struct {
	RepoTags     []string `json:"repoTags"`
	Digest       string   `json:"digest"`
	OS           string   `json:"os"`
	Architecture string   `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		User       string            `json:"User"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	Files []struct {
		Path string `json:"path"`
		Type string `json:"type"`
		Mode int64  `json:"mode"`
		UID  int    `json:"uid"`
		GID  int    `json:"gid"`
	} `json:"files"`
	root string // where its files were extracted
}

// open builds the images if need be and reads the tarball name (operator, bundle, catalog).
func open(t *testing.T, name string) *report {
	t.Helper()
	for _, tool := range []string{"imagetar", "opm", "grpc_health_probe"} {
		testenv.Tool(t, tool)
	}
	if out, err := makeImages(); err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	r := &report{root: t.TempDir()}
	out, err := exec.Command(testenv.Tool(t, "imagetar"), "inspect", "-extract", r.root,
		filepath.Join(imagesDir, name+".tar")).Output()
	if err != nil {
		t.Fatalf("imagetar inspect %s.tar: %v", name, err)
	}
	if err := json.Unmarshal(out, r); err != nil {
		t.Fatal(err)
	}
	if r.OS != "linux" || r.Architecture != runtime.GOARCH {
		t.Errorf("%s image: platform %s/%s, want linux/%s (IMAGE_ARCH's default)", name, r.OS, r.Architecture, runtime.GOARCH)
	}
	return r
}

// file returns the image's entry at p; the test fails when there is none.
func (r *report) file(t *testing.T, p string) (typ string, mode int64, uid, gid int) {
	t.Helper()
	for _, f := range r.Files {
		if f.Path == p {
			return f.Type, f.Mode, f.UID, f.GID
		}
	}
	t.Fatalf("the image has no %s", p)
	return "", 0, 0, 0
}

// wantFile checks that p is in the image with that type, mode and owner.
func (r *report) wantFile(t *testing.T, p, typ string, mode int64, uid, gid int) {
	t.Helper()
	gotTyp, gotMode, gotUID, gotGID := r.file(t, p)
	if gotTyp != typ || gotMode != mode || gotUID != uid || gotGID != gid {
		t.Errorf("%s: %s %#o %d:%d, want %s %#o %d:%d", p, gotTyp, gotMode, gotUID, gotGID, typ, mode, uid, gid)
	}
}

// dockerfile is the final stage of a Dockerfile, instruction by instruction, and all its
// instructions; continuation lines joined, comments dropped.
type dockerfile struct {
	from  string
	final map[string][]string // instruction (upper case) -> arguments, in order
	all   []string
}

func readDockerfile(t *testing.T, name string) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), name))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	joined := ""
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || (l == "" && joined == "") {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			joined += s + " "
			continue
		}
		lines = append(lines, joined+l)
		joined = ""
	}
	d := dockerfile{}
	for _, l := range lines {
		word, args, _ := strings.Cut(l, " ")
		d.all = append(d.all, l)
		if strings.EqualFold(word, "FROM") {
			d.from, _, _ = strings.Cut(strings.TrimSpace(args), " ")
			d.final = map[string][]string{}
			continue
		}
		if d.final == nil {
			continue
		}
		d.final[strings.ToUpper(word)] = append(d.final[strings.ToUpper(word)], strings.TrimSpace(args))
	}
	return d
}

// wantDockerfile checks the image's tag, and that its entrypoint and command are those of
// the Dockerfile's final stage.
func (r *report) wantDockerfile(t *testing.T, d dockerfile, tag string) {
	t.Helper()
	if !slices.Equal(r.RepoTags, []string{tag}) {
		t.Errorf("tags %v, want [%s]", r.RepoTags, tag)
	}
	if want := d.execForm(t, "ENTRYPOINT"); !slices.Equal(r.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want the Dockerfile's %q", r.Config.Entrypoint, want)
	}
	if want := d.execForm(t, "CMD"); !slices.Equal(r.Config.Cmd, want) {
		t.Errorf("cmd %q, want the Dockerfile's %q", r.Config.Cmd, want)
	}
}

// execForm reads an ENTRYPOINT or CMD of the final stage; nil when it has none.
func (d dockerfile) execForm(t *testing.T, instr string) []string {
	t.Helper()
	args := d.final[instr]
	if len(args) == 0 {
		return nil
	}
	var words []string
	if err := json.Unmarshal([]byte(args[len(args)-1]), &words); err != nil {
		t.Fatalf("%s %s: want the JSON array form: %v", instr, args[len(args)-1], err)
	}
	return words
}

// labels reads the final stage's LABEL key=value pairs (values without spaces).
func (d dockerfile) labels() map[string]string {
	out := map[string]string{}
	for _, args := range d.final["LABEL"] {
		for _, kv := range strings.Fields(args) {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// checkStatic checks that the extracted file p is an executable for the image's
// architecture, statically linked (no program interpreter, no shared library) and stripped
// (-ldflags="-s -w": no symbol table, no DWARF).
func checkStatic(t *testing.T, r *report, p string) {
	t.Helper()
	f, err := elf.Open(filepath.Join(r.root, p))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer f.Close()
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390}
	if f.Type != elf.ET_EXEC || f.Machine != machines[r.Architecture] {
		t.Errorf("%s: ELF %s for %s, want an executable for %s", p, f.Type, f.Machine, r.Architecture)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: it is dynamically linked", p)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v (%v)", p, libs, err)
	}
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") {
			t.Errorf("%s has a %s section: not built with -ldflags=\"-s -w\"", p, s.Name)
		}
	}
}

// buildSettings are the go build settings recorded in the binary p.
func buildSettings(t *testing.T, p string) (*buildinfo.BuildInfo, map[string]string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	return bi, settings
}

// TestOperatorImage: the settings of Dockerfile's final stage (USER 65532:65532, ENTRYPOINT
// ["/manager"]), /manager a static, stripped executable built with the builder stage's
// flags, and what the distroless stand-in gives a non-root static program.
func TestOperatorImage(t *testing.T) {
	r := open(t, "operator")
	d := readDockerfile(t, "Dockerfile")
	r.wantDockerfile(t, d, operatorRef)
	if !slices.Equal(r.Config.Entrypoint, []string{"/manager"}) || len(r.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q: want [/manager] and none", r.Config.Entrypoint, r.Config.Cmd)
	}
	if users := d.final["USER"]; len(users) != 1 || r.Config.User != users[0] || r.Config.User != "65532:65532" {
		t.Errorf("user %q, want Dockerfile's %v (65532:65532)", r.Config.User, users)
	}
	if workdirs := d.final["WORKDIR"]; len(workdirs) != 1 || r.Config.WorkingDir != workdirs[0] {
		t.Errorf("working directory %q, want Dockerfile's %v", r.Config.WorkingDir, workdirs)
	}
	if len(r.Config.Labels) != 0 {
		t.Errorf("labels %v, want none", r.Config.Labels)
	}

	r.wantFile(t, "/manager", "file", 0o755, 0, 0)
	checkStatic(t, r, "/manager")
	// The builder stage's go build: the Makefile's flags are the Dockerfile's.
	var goBuild string
	for _, l := range d.all {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
			goBuild = l
		}
	}
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w"`} {
		if !strings.Contains(goBuild, flag) {
			t.Errorf("Dockerfile's builder no longer builds with %s (%q): update the image-tar target and this test", flag, goBuild)
		}
	}
	bi, settings := buildSettings(t, filepath.Join(r.root, "manager"))
	if bi.Path != "github.com/middleware-operator/middleware-operator" || settings["CGO_ENABLED"] != "0" ||
		settings["-trimpath"] != "true" || settings["GOOS"] != "linux" || settings["GOARCH"] != r.Architecture {
		t.Errorf("/manager built as %s with %v, want the operator with CGO_ENABLED=0 -trimpath for linux/%s", bi.Path, settings, r.Architecture)
	}
	if r.Architecture == runtime.GOARCH {
		out, _ := exec.Command(filepath.Join(r.root, "manager"), "--help").CombinedOutput()
		if !strings.Contains(string(out), "-metrics-bind-address") {
			t.Errorf("/manager --help:\n%s", out)
		}
	}

	// The distroless stand-in: the user 65532 has a name and a home, /tmp is there.
	r.wantFile(t, "/etc/passwd", "file", 0o644, 0, 0)
	passwd, err := os.ReadFile(filepath.Join(r.root, "etc", "passwd"))
	if err != nil || !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:[^:]*:/home/nonroot:`).Match(passwd) {
		t.Errorf("/etc/passwd has no nonroot user 65532 (%v):\n%s", err, passwd)
	}
	r.wantFile(t, "/home/nonroot", "dir", 0o700, 65532, 65532)
	r.wantFile(t, "/tmp", "dir", 0o1777, 0, 0)
	if !slices.Contains(r.Config.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		t.Errorf("env %q, want distroless's PATH", r.Config.Env)
	}
}

// TestBundleImage: every LABEL of bundle.Dockerfile and nothing else, each annotation of
// bundle/metadata/annotations.yaml among them with its value, and exactly the files of
// bundle/manifests, bundle/metadata and bundle/tests/scorecard at /manifests/, /metadata/
// and /tests/scorecard/.
func TestBundleImage(t *testing.T) {
	r := open(t, "bundle")
	d := readDockerfile(t, "bundle.Dockerfile")
	r.wantDockerfile(t, d, bundleRef)
	if d.from != "scratch" {
		t.Errorf("bundle.Dockerfile is FROM %s, want scratch", d.from)
	}
	want := d.labels()
	if len(want) < 10 || !maps.Equal(r.Config.Labels, want) {
		t.Errorf("labels:\n%v\nwant bundle.Dockerfile's:\n%v", r.Config.Labels, want)
	}
	var metadata struct {
		Annotations map[string]string `json:"annotations"`
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &metadata); err != nil {
		t.Fatal(err)
	}
	for k, v := range metadata.Annotations {
		if r.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want annotations.yaml's %q", k, r.Config.Labels[k], v)
		}
	}
	if len(r.Config.Entrypoint)+len(r.Config.Cmd) != 0 || r.Config.User != "" {
		t.Errorf("entrypoint %q, cmd %q, user %q: want none", r.Config.Entrypoint, r.Config.Cmd, r.Config.User)
	}

	copies := map[string]string{"bundle/manifests": "/manifests", "bundle/metadata": "/metadata", "bundle/tests/scorecard": "/tests/scorecard"}
	for _, c := range d.final["COPY"] {
		src, dst, _ := strings.Cut(c, " ")
		if copies[src] != strings.TrimSuffix(dst, "/") {
			t.Errorf("bundle.Dockerfile copies %s to %s: update this test", src, dst)
		}
	}
	if len(d.final["COPY"]) != len(copies) {
		t.Errorf("bundle.Dockerfile has %d COPY lines, want %d", len(d.final["COPY"]), len(copies))
	}
	files := 0
	for src, dst := range copies {
		files += sameTree(t, r, filepath.Join(testenv.RepoRoot(), src), dst)
	}
	var csv bool
	for _, f := range r.Files {
		if f.Type == "file" {
			files--
		}
		csv = csv || (strings.HasPrefix(f.Path, "/manifests/") && strings.HasSuffix(f.Path, ".clusterserviceversion.yaml"))
	}
	if files != 0 {
		t.Errorf("the image has %d files more than bundle.Dockerfile copies", -files)
	}
	if !csv {
		t.Error("no /manifests/*.clusterserviceversion.yaml")
	}
}

// sameTree checks that every file under the repository's dir is in the image at dst with the
// same content, owned by root; it returns how many there are.
func sameTree(t *testing.T, r *report, dir, dst string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		in := filepath.ToSlash(filepath.Join(dst, rel))
		r.wantFile(t, in, "file", 0o644, 0, 0)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(in)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (%v)", in, p, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCatalogImage: catalog.Dockerfile's ENTRYPOINT, CMD and LABEL; the opm base image's user
// 1001, /bin/opm (the project's opm, the base image's version) and /bin/grpc_health_probe
// (the version opm pins), static; catalog/ at /configs and a cache at /tmp/cache that opm
// accepts for it; and OLM's probe of a CatalogSource pod passing against the image's opm.
func TestCatalogImage(t *testing.T) {
	r := open(t, "catalog")
	d := readDockerfile(t, "catalog.Dockerfile")
	r.wantDockerfile(t, d, catalogRef)
	if !slices.Equal(r.Config.Entrypoint, []string{"/bin/opm"}) || !slices.Equal(r.Config.Cmd, []string{"serve", "/configs", "--cache-dir=/tmp/cache"}) {
		t.Errorf("entrypoint %q, cmd %q: want /bin/opm serve /configs --cache-dir=/tmp/cache", r.Config.Entrypoint, r.Config.Cmd)
	}
	if want := d.labels(); !maps.Equal(r.Config.Labels, want) || want["operators.operatorframework.io.index.configs.v1"] != "/configs" {
		t.Errorf("labels %v, want catalog.Dockerfile's %v", r.Config.Labels, want)
	}
	if r.Config.User != "1001" {
		t.Errorf("user %q, want the opm image's 1001", r.Config.User)
	}

	repo, tag, _ := strings.Cut(d.from, ":")
	if repo != "quay.io/operator-framework/opm" {
		t.Fatalf("catalog.Dockerfile is FROM %s: update the opm stand-in of imagetar and this test", d.from)
	}
	for _, p := range []string{"/bin/opm", "/bin/grpc_health_probe"} {
		r.wantFile(t, p, "file", 0o755, 0, 0)
		checkStatic(t, r, p)
	}
	if bi, _ := buildSettings(t, filepath.Join(r.root, "bin", "opm")); bi.Main.Path != "github.com/operator-framework/operator-registry" || bi.Main.Version != tag {
		t.Errorf("/bin/opm is %s %s, want operator-registry %s as catalog.Dockerfile's base", bi.Main.Path, bi.Main.Version, tag)
	}
	if bi, _ := buildSettings(t, filepath.Join(r.root, "bin", "grpc_health_probe")); bi.Main.Version != probeVersion(t, tag) {
		t.Errorf("/bin/grpc_health_probe is %s %s, want the version operator-registry %s pins, %s", bi.Main.Path, bi.Main.Version, tag, probeVersion(t, tag))
	}
	r.wantFile(t, "/tmp", "dir", 0o1777, 0, 0)
	r.wantFile(t, "/etc/nsswitch.conf", "file", 0o644, 0, 0)
	if sameTree(t, r, filepath.Join(testenv.RepoRoot(), "catalog"), "/configs") == 0 {
		t.Error("catalog/ is empty")
	}

	opm := filepath.Join(r.root, "bin", "opm")
	configs, cache := filepath.Join(r.root, "configs"), filepath.Join(r.root, "tmp", "cache")
	quiet := []string{"--pprof-addr=", "-t", filepath.Join(t.TempDir(), "termination-log")}
	// What the CMD does first: opm refuses a cache that does not match /configs.
	if out, err := exec.Command(opm, append([]string{"serve", configs, "--cache-dir=" + cache, "--cache-enforce-integrity", "--cache-only"}, quiet...)...).CombinedOutput(); err != nil {
		t.Fatalf("the image's cache does not pass opm's integrity check: %v\n%s", err, out)
	}
	// Then it serves; OLM probes the pod with grpc_health_probe -addr=:50051.
	port := testenv.FreePorts(t, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, opm, append([]string{"serve", configs, "--cache-dir=" + cache, "-p", strconv.Itoa(port)}, quiet...)...)
	var log bytes.Buffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	probe := filepath.Join(r.root, "bin", "grpc_health_probe")
	for {
		out, err := exec.CommandContext(ctx, probe, "-addr=127.0.0.1:"+strconv.Itoa(port)).CombinedOutput()
		if err == nil && strings.Contains(string(out), "SERVING") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("grpc_health_probe never passed: %v\n%s\nopm serve:\n%s", err, out, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probeVersion is the grpc-health-probe version operator-registry's go.mod pins at the tag,
// which its opm image ships: read from the module cache (make tools downloaded it).
func probeVersion(t *testing.T, tag string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/operator-framework/operator-registry@"+tag)
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "hack", "tools", "opm")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download operator-registry@%s: %v", tag, err)
	}
	var m struct{ GoMod string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(m.GoMod)
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`github.com/grpc-ecosystem/grpc-health-probe (v\S+)`).FindSubmatch(gomod)
	if v == nil {
		t.Fatalf("operator-registry@%s's go.mod does not require grpc-health-probe", tag)
	}
	return string(v[1])
}

// TestImagesAreReproducible: the same inputs give the same image digest (every time stamp
// is SOURCE_DATE_EPOCH, 0 by default), so an unchanged bundle pushes as the same image.
func TestImagesAreReproducible(t *testing.T) {
	first := open(t, "bundle")
	dir := t.TempDir()
	cmd := exec.Command("make", "-o", "images-tools", "bundle-image-tar", "IMAGES_DIR="+dir, "BUNDLE_IMG="+bundleRef)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make bundle-image-tar: %v\n%s", err, out)
	}
	out, err := exec.Command(testenv.Tool(t, "imagetar"), "inspect", filepath.Join(dir, "bundle.tar")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var second report
	if err := json.Unmarshal(out, &second); err != nil {
		t.Fatal(err)
	}
	if first.Digest == "" || second.Digest != first.Digest {
		t.Errorf("two builds of the bundle image: %s and %s", first.Digest, second.Digest)
	}
}

// TestOperatorBuilderCopiesEverySource: the operator's builder stage COPYs every directory
// of the module the shipped binary compiles from, embedded files included (config/prometheus
// holds the alert rules the operator embeds); a package added outside the copied folders
// would otherwise build here and fail in `docker build`.
func TestOperatorBuilderCopiesEverySource(t *testing.T) {
	d := readDockerfile(t, "Dockerfile")
	var copied []string
	for _, l := range d.all {
		if strings.HasPrefix(l, "FROM ") && len(copied) > 0 {
			break // the builder stage ends at the next FROM
		}
		if args, ok := strings.CutPrefix(l, "COPY "); ok && !strings.Contains(args, "--from") {
			f := strings.Fields(args)
			for _, src := range f[:len(f)-1] {
				copied = append(copied, strings.TrimSuffix(src, "/"))
			}
		}
	}
	root := testenv.RepoRoot()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		rel, err := filepath.Rel(root, f[0])
		if err != nil {
			t.Fatal(err)
		}
		checked++
		covered := func(p string) bool {
			return slices.ContainsFunc(copied, func(c string) bool { return p == c || strings.HasPrefix(p, c+"/") || c == "." })
		}
		if rel == "." {
			if !covered("main.go") {
				t.Errorf("the builder stage does not COPY main.go (copies %v)", copied)
			}
			continue
		}
		if !covered(rel) {
			t.Errorf("the operator compiles %s, which the Dockerfile's builder stage does not COPY (it copies %v): add `COPY %s/ %s/`", rel, copied, rel, rel)
		}
		for _, e := range f[1:] {
			if p := filepath.Join(rel, e); !covered(p) {
				t.Errorf("the operator embeds %s, which the builder stage does not COPY", p)
			}
		}
	}
	if checked < 10 {
		t.Errorf("go list found only %d of the module's packages in the operator: the check proves nothing", checked)
	}
}
