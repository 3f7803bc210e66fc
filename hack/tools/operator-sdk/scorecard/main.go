// Command scorecard runs the scorecard tests of an operator bundle the way `operator-sdk
// scorecard` does, without a cluster or container images.
//
// `operator-sdk scorecard` starts one pod per test from the image named in the bundle's
// tests/scorecard/config.yaml; an init container unpacks the bundle at /bundle and the test
// image's scorecard-test program inspects it and prints a v1alpha3 TestStatus. Here the same
// scorecard-test program (built from the operator-sdk module, github.com/operator-framework/
// operator-sdk/images/scorecard-test) runs in a chroot that holds only the program and a copy
// of the bundle at /bundle. The configuration, the selection by labels, the stages and the
// output (text, json) and exit status are those of `operator-sdk scorecard`.
//
// usage: scorecard [-o text|json] [-selector suite=olm] [-runner path/to/scorecard-test] <bundle dir>
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// runnerName is the entrypoint of the built-in tests in the scorecard-test image.
const runnerName = "scorecard-test"

func main() {
	output := flag.String("o", "text", "output format: text or json")
	selector := flag.String("selector", "", "label selector of the tests to run (as operator-sdk scorecard --selector)")
	runner := flag.String("runner", "", "path of the scorecard-test program (default: scorecard-test next to this program, else on PATH)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: scorecard [-o text|json] [-selector expr] [-runner path] <bundle dir>")
		os.Exit(2)
	}
	list, err := run(flag.Arg(0), *runner, *selector)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scorecard:", err)
		os.Exit(1)
	}
	if err := writeOutput(os.Stdout, list, *output); err != nil {
		fmt.Fprintln(os.Stderr, "scorecard:", err)
		os.Exit(1)
	}
	for _, t := range list.Items {
		for _, r := range t.Status.Results {
			if r.State != v1alpha3.PassState {
				os.Exit(1)
			}
		}
	}
}

// run runs the selected tests of the bundle's scorecard configuration, stage by stage.
func run(bundleDir, runner, selector string) (v1alpha3.TestList, error) {
	list := v1alpha3.NewTestList()
	sel, err := labels.Parse(selector)
	if err != nil {
		return list, fmt.Errorf("while parsing the selector %q: %w", selector, err)
	}
	data, err := os.ReadFile(filepath.Join(bundleDir, "tests", "scorecard", "config.yaml"))
	if err != nil {
		return list, fmt.Errorf("while reading the scorecard configuration: %w", err)
	}
	var cfg v1alpha3.Configuration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return list, fmt.Errorf("while parsing the scorecard configuration: %w", err)
	}
	if runner, err = findRunner(runner); err != nil {
		return list, err
	}
	root, err := newRoot(bundleDir, runner)
	if err != nil {
		return list, err
	}
	defer func() { _ = os.RemoveAll(root) }()

	for _, stage := range cfg.Stages {
		var selected []v1alpha3.TestConfiguration
		for _, tc := range stage.Tests {
			if sel.Matches(labels.Set(tc.Labels)) {
				selected = append(selected, tc)
			}
		}
		results := make([]v1alpha3.Test, len(selected))
		var wg sync.WaitGroup
		for i, tc := range selected {
			if !stage.Parallel {
				results[i] = runTest(root, tc)
				continue
			}
			wg.Go(func() { results[i] = runTest(root, tc) })
		}
		wg.Wait()
		list.Items = append(list.Items, results...)
	}
	return list, nil
}

// findRunner returns the scorecard-test program to run.
func findRunner(runner string) (string, error) {
	if runner != "" {
		return runner, nil
	}
	// Next to this program as invoked (bin/scorecard links to the cache), then as resolved.
	dirs := []string{filepath.Dir(os.Args[0])}
	if self, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(self))
	}
	for _, dir := range dirs {
		if p := filepath.Join(dir, runnerName); isFile(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(runnerName)
	if err != nil {
		return "", fmt.Errorf("the scorecard test runner %s is not built (make tools): %w", runnerName, err)
	}
	return p, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// newRoot makes the file system the tests run in: the runner at /scorecard-test and the
// bundle at /bundle, where the scorecard-test image's pod has them.
func newRoot(bundleDir, runner string) (string, error) {
	root, err := os.MkdirTemp("", "scorecard-root-")
	if err != nil {
		return "", err
	}
	if err := copyFile(runner, filepath.Join(root, runnerName), 0o755); err != nil {
		_ = os.RemoveAll(root)
		return "", fmt.Errorf("while copying the runner: %w", err)
	}
	if err := copyTree(bundleDir, filepath.Join(root, "bundle")); err != nil {
		_ = os.RemoveAll(root)
		return "", fmt.Errorf("while copying the bundle: %w", err)
	}
	return root, nil
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		return copyFile(p, target, 0o644)
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// runTest runs one test in the chroot and returns it with the status the runner printed, or
// an error state when the runner could not run or printed no status.
func runTest(root string, tc v1alpha3.TestConfiguration) v1alpha3.Test {
	test := v1alpha3.NewTest()
	test.Spec = tc
	fail := func(format string, args ...any) v1alpha3.Test {
		test.Status = v1alpha3.TestStatus{Results: []v1alpha3.TestResult{{
			State: v1alpha3.ErrorState, Errors: []string{fmt.Sprintf(format, args...)},
		}}}
		return test
	}
	if len(tc.Entrypoint) == 0 || tc.Entrypoint[0] != runnerName {
		return fail("only the built-in tests of the scorecard-test image run without a cluster; entrypoint %q is not one", tc.Entrypoint)
	}
	cmd := exec.Command("/"+runnerName, tc.Entrypoint[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	if os.Geteuid() != 0 {
		// chroot needs CAP_SYS_CHROOT: take it in a user namespace of our own.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var status v1alpha3.TestStatus
	if err := json.Unmarshal(stdout.Bytes(), &status); err != nil || len(status.Results) == 0 {
		var exit *exec.ExitError
		if runErr != nil && !errors.As(runErr, &exit) {
			return fail("while running %s: %v", runnerName, runErr)
		}
		return fail("%s printed no test status (%v): %s%s", runnerName, runErr, stdout.String(), stderr.String())
	}
	test.Status = status
	return test
}

// writeOutput writes the results as `operator-sdk scorecard -o <format>` does.
func writeOutput(w io.Writer, list v1alpha3.TestList, format string) error {
	switch format {
	case "text":
		if len(list.Items) == 0 {
			_, err := fmt.Fprintln(w, "0 tests selected")
			return err
		}
		for _, t := range list.Items {
			if _, err := fmt.Fprintln(w, t.MarshalText()); err != nil {
				return err
			}
		}
		return nil
	case "json":
		data, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	default:
		return fmt.Errorf("invalid output format %q: want text or json", format)
	}
}
