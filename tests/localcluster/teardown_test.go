package localcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// childEnv makes the test binary run a cluster in the foreground, like `make cluster`.
const childEnv = "MWO_LOCALCLUSTER_CHILD_STATE"

// clusterState is what a child cluster reports about itself.
type clusterState struct {
	PIDs  map[string]int
	Ports map[string]int
}

// runChildCluster starts a cluster, writes its state to the file named by childEnv and
// stops the cluster on SIGINT or SIGTERM.
func runChildCluster() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{ObjectStore: true})
	if err != nil {
		return
	}
	data, _ := json.Marshal(clusterState{PIDs: c.PIDs(), Ports: c.Ports})
	statePath := os.Getenv(childEnv)
	_ = os.WriteFile(statePath+".tmp", data, 0o600)
	_ = os.Rename(statePath+".tmp", statePath)
	<-ctx.Done()
	c.Stop()
}

func assertNothingLeft(t *testing.T, state clusterState) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for name, pid := range state.PIDs {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running", name, pid)
		}
	}
	for name, port := range state.Ports {
		if listening(strconv.Itoa(port)) {
			out, _ := exec.Command("ss", "-ltnpH", "sport = :"+strconv.Itoa(port)).CombinedOutput()
			t.Errorf("%s's port %d is still listening: %s", name, port, out)
		}
	}
}

// alive reports whether any thread of pid still runs. A killed Go process's main thread can
// be a zombie while its other threads are still closing its sockets, so every thread counts.
func alive(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false
	}
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			continue
		}
		// The state letter follows the command name in parentheses.
		if i := bytes.LastIndexByte(data, ')'); i > 0 && i+2 < len(data) && data[i+2] != 'Z' && data[i+2] != 'X' {
			return true
		}
	}
	return false
}

func TestStopLeavesNoProcessOrPort(t *testing.T) {
	c, err := localcluster.Start(t.Context(), localcluster.Options{ObjectStore: true})
	if err != nil {
		t.Fatal(err)
	}
	state := clusterState{PIDs: c.PIDs(), Ports: c.Ports}
	if len(state.PIDs) != 6 {
		t.Fatalf("want 6 components running (with the object store), got %v", state.PIDs)
	}
	dir := c.Dir
	c.Stop()
	assertNothingLeft(t, state)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary directory %s is still there", dir)
	}
}

func TestSignalsLeaveNoProcessOrPort(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGKILL of the parent": syscall.SIGKILL} {
		t.Run(name, func(t *testing.T) {
			statePath := filepath.Join(t.TempDir(), "state.json")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+statePath)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var state clusterState
			deadline := time.Now().Add(time.Minute)
			for {
				data, err := os.ReadFile(statePath)
				if err == nil && json.Unmarshal(data, &state) == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatal("the child cluster never became ready")
				}
				time.Sleep(100 * time.Millisecond)
			}
			for component, port := range state.Ports {
				if component != "etcd-peer" && !listening(strconv.Itoa(port)) {
					t.Errorf("%s is not listening on %d while the cluster runs", component, port)
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			assertNothingLeft(t, state)
		})
	}
}
