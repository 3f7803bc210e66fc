// Package redistest has what tests of RedisClusters on real redis-server share: a writer
// that records every acknowledged write and reads each back through every node, and waits
// on what the status and redis-cli say.
package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
)

// Writer writes keys w:<n> = n through a cluster-aware client for as long as it runs,
// retrying a failed write until it succeeds, and remembers every key it was told was
// written, so a test can check that none is lost. It measures the longest stretch during
// which writes kept failing.
type Writer struct {
	client    *goredis.ClusterClient
	tls       *tls.Config // nil: plain text
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	written   int
	maxOutage time.Duration // from the first failed write of a key to its success
	maxWrite  time.Duration // the slowest single SET, the client's own retries included
	failures  int           // SETs that returned an error
	lastErr   error         // the last of those errors
}

// StartWriter starts a Writer whose client knows only the node at addr.
func StartWriter(addr, password string) *Writer { return StartTLSWriter(addr, password, nil) }

// StartTLSWriter is StartWriter over TLS with tlsConfig (plain text when nil); Verify reads
// back over TLS too.
func StartTLSWriter(addr, password string, tlsConfig *tls.Config) *Writer {
	return startWriter(testClient(addr, password, tlsConfig), tlsConfig)
}

// StartReconnectingTLSWriter is StartTLSWriter with a client that replaces each connection
// after connLifetime: every new connection meets the certificate the node serves then, and
// verifies it with tlsConfig as it is then (a client whose CA file changes under it).
func StartReconnectingTLSWriter(addr, password string, tlsConfig *tls.Config, connLifetime time.Duration) *Writer {
	return startWriter(testClient(addr, password, tlsConfig, func(o *goredis.ClusterOptions) { o.ConnMaxLifetime = connLifetime }), tlsConfig)
}

func startWriter(c *goredis.ClusterClient, tlsConfig *tls.Config) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		client: c,
		tls:    tlsConfig,
		cancel: cancel, done: make(chan struct{}),
	}
	go w.run(ctx)
	return w
}

// testClient is the cluster client of a Writer or a Probe: it knows only the node at addr,
// follows up to 16 redirects and gives each command a second.
func testClient(addr, password string, tlsConfig *tls.Config, tune ...func(*goredis.ClusterOptions)) *goredis.ClusterClient {
	opts := &goredis.ClusterOptions{
		Addrs: []string{addr}, Password: password, MaxRedirects: 16, TLSConfig: tlsConfig,
		ReadTimeout: time.Second, WriteTimeout: time.Second, DialTimeout: time.Second,
	}
	for _, f := range tune {
		f(opts)
	}
	return goredis.NewClusterClient(opts)
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	for n := 0; ctx.Err() == nil; n++ {
		var failingSince time.Time
		for ctx.Err() == nil {
			start := time.Now()
			err := w.client.Set(ctx, "w:"+strconv.Itoa(n), n, 0).Err()
			w.mu.Lock()
			w.maxWrite = max(w.maxWrite, time.Since(start))
			if err != nil && ctx.Err() == nil {
				w.failures++
				w.lastErr = err
			}
			w.mu.Unlock()
			if err == nil {
				break
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			time.Sleep(20 * time.Millisecond)
		}
		w.mu.Lock()
		if ctx.Err() == nil {
			w.written = n + 1
		}
		if !failingSince.IsZero() {
			w.maxOutage = max(w.maxOutage, time.Since(failingSince))
		}
		w.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// Failures is how many writes returned an error so far (each was retried), and the last
// such error.
func (w *Writer) Failures() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failures, w.lastErr
}

// Written is how many keys the writer has been told were written so far.
func (w *Writer) Written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// WaitWritten waits up to a minute until the writer has n more acknowledged keys than when
// called: before a fault, so that the fault meets data; after a recovery, so that the
// cluster is shown to take writes again. It fails the test otherwise.
func (w *Writer) WaitWritten(t *testing.T, n int) {
	t.Helper()
	from := w.Written()
	deadline := time.Now().Add(time.Minute)
	for w.Written() < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("the writer had %d more acknowledged keys after a minute, want %d", w.Written()-from, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// minWritten is the fewest acknowledged keys Verify accepts: a writer that never got a
// write through would make the read-back prove nothing.
const minWritten = 100

// Stop ends the writer and returns how many keys it wrote and the longest time a write
// was failing or blocked.
func (w *Writer) Stop() (int, time.Duration) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written, max(w.maxOutage, w.maxWrite)
}

// Verify reads back every key written through each node of rc in turn, as a client whose
// only seed is that node: GET at the node, following a MOVED redirect once to the owner it
// names. It fails the test for every key lost, and for every key a client entering at some
// node cannot reach.
func (w *Writer) Verify(t *testing.T, c client.Client, rc *redisv1alpha1.RedisCluster, password string) {
	t.Helper()
	w.VerifyExcept(t, c, rc, password, func(int) bool { return false })
}

// VerifyExcept is Verify for a test that gave up some slots on purpose (a loss the user
// accepted): a key in a slot for which given returns true may be missing; it returns how
// many were. Every other key must read back through every node.
func (w *Writer) VerifyExcept(t *testing.T, c client.Client, rc *redisv1alpha1.RedisCluster, password string, given func(slot int) bool) int {
	t.Helper()
	n, _ := w.Stop()
	_ = w.client.Close()
	if n < minWritten {
		t.Errorf("the writer had only %d acknowledged keys, want at least %d: the read-back would prove nothing", n, minWritten)
	}
	var keys []string
	expected := 0
	for i := range n {
		k := "w:" + strconv.Itoa(i)
		if given(KeySlot(k)) {
			expected++
			continue
		}
		keys = append(keys, k)
	}
	lost := w.readThroughEach(t, rc, password, keys)
	copies := w.verifyReplicas(t, c, rc, password, keys)
	switch {
	case len(lost) > 0:
		t.Errorf("%d of %d acknowledged keys outside the given-up slots unreadable through some node", len(lost), len(keys))
		LogEvents(t, c, rc.Namespace)
	case expected > 0:
		t.Logf("the writer wrote %d keys; the %d outside the given-up slots read back through each of the %d nodes (%d were in them)",
			n, len(keys), len(rc.Status.Nodes), expected)
	default:
		t.Logf("the writer wrote %d keys; every one reads back through each of the %d nodes, and %d copies on replicas (READONLY)", n, len(rc.Status.Nodes), copies)
	}
	return expected
}

// VerifyFirstOn reads back the writer's first n keys (w:0 to w:n-1, every one acknowledged
// before some moment: a backup's start, say) through each node of another cluster rc, as
// Verify does, and fails the test for every one missing or wrong. The writer keeps running.
// It returns how many keys were missing through some node.
func (w *Writer) VerifyFirstOn(t *testing.T, rc *redisv1alpha1.RedisCluster, password string, n int) int {
	t.Helper()
	keys := make([]string, n)
	for i := range n {
		keys[i] = "w:" + strconv.Itoa(i)
	}
	lost := w.readThroughEach(t, rc, password, keys)
	if len(lost) == 0 {
		t.Logf("all %d keys read back through each of the %d nodes of %s/%s", n, len(rc.Status.Nodes), rc.Namespace, rc.Name)
	}
	return len(lost)
}

// readThroughEach reads keys through each node of rc in turn (readThrough) and returns the
// keys some node could not serve with their value, failing the test for each such node.
func (w *Writer) readThroughEach(t *testing.T, rc *redisv1alpha1.RedisCluster, password string, keys []string) map[string]bool {
	t.Helper()
	return readThroughEach(t, rc, password, w.tls, keys)
}

func readThroughEach(t *testing.T, rc *redisv1alpha1.RedisCluster, password string, tlsConfig *tls.Config, keys []string) map[string]bool {
	t.Helper()
	return readThroughEachReporting(t, rc, password, tlsConfig, keys, t.Errorf)
}

// readThroughEachReporting is readThroughEach that tells report (t.Errorf, t.Logf) of each
// node that could not serve some keys.
func readThroughEachReporting(t *testing.T, rc *redisv1alpha1.RedisCluster, password string, tlsConfig *tls.Config, keys []string,
	report func(format string, args ...any)) map[string]bool {
	t.Helper()
	lost := map[string]bool{}
	for _, node := range rc.Status.Nodes {
		missing, firstErr := readThrough(t, node.Instance, password, tlsConfig, keys)
		for _, k := range missing {
			lost[k] = true
		}
		if len(missing) > 0 {
			report("a client entering %s at %s (%s) cannot read %d of %d keys: %v", rc.Name, node.Name, node.Instance, len(missing), len(keys), firstErr)
		}
	}
	return lost
}

// replicaCatchUp is how long a replica may take to hold its master's last writes once the
// writer has stopped.
const replicaCatchUp = 15 * time.Second

// verifyReplicas reads keys at every replica of the status with READONLY: each must serve
// every key of its master's slots with the value written (a failover to it would lose any
// it lacks), once it has had replicaCatchUp to catch up. It returns how many copies were
// read.
func (w *Writer) verifyReplicas(t *testing.T, c client.Client, rc *redisv1alpha1.RedisCluster, password string, keys []string) int {
	t.Helper()
	// The roles and slots as they are now (rc may have been read before the last failover).
	if fresh := (&redisv1alpha1.RedisCluster{}); c.Get(t.Context(), client.ObjectKeyFromObject(rc), fresh) == nil {
		rc = fresh
	}
	slotsOf := map[string]string{}
	for _, node := range rc.Status.Nodes {
		if node.Type == "master" {
			slotsOf[node.NodeID] = node.Slots
		}
	}
	total := 0
	for _, node := range rc.Status.Nodes {
		if node.Type != "slave" {
			continue
		}
		owned := slotSet(slotsOf[node.MasterNodeID])
		expected := 0
		for _, k := range keys {
			if owned[KeySlot(k)] {
				expected++
			}
		}
		if expected == 0 {
			continue // its master serves none of the keys kept (a shard given up, say)
		}
		deadline := time.Now().Add(replicaCatchUp)
		for {
			served, missing, err := readCopies(t, node.Instance, password, w.tls, keys)
			switch {
			case len(missing) == 0 && served == expected:
				total += served
			case time.Now().Before(deadline):
				time.Sleep(500 * time.Millisecond)
				continue
			default:
				t.Errorf("replica %s (%s) serves %d of the %d keys of its master's slots with READONLY, %d of them wrong or missing, after %s: %v",
					node.Name, node.Instance, served, expected, len(missing), replicaCatchUp, err)
			}
			break
		}
	}
	return total
}

// slotSet reads slot ranges as the status prints them ("0-5460,5461").
func slotSet(ranges string) map[int]bool {
	out := map[int]bool{}
	for part := range strings.SplitSeq(ranges, ",") {
		from, to, found := strings.Cut(part, "-")
		start, err := strconv.Atoi(from)
		if err != nil {
			continue
		}
		end := start
		if found {
			if end, err = strconv.Atoi(to); err != nil {
				continue
			}
		}
		for s := start; s <= end; s++ {
			out[s] = true
		}
	}
	return out
}

// getAll GETs keys at c in one pipeline; the error is the pipeline's first.
func getAll(t *testing.T, c *goredis.Client, keys []string) ([]*goredis.StringCmd, error) {
	cmds := make([]*goredis.StringCmd, len(keys))
	_, err := c.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(t.Context(), k)
		}
		return nil
	})
	return cmds, err
}

// readCopies GETs keys at the node at addr after READONLY, in pipelined batches: a key of a
// slot its master does not own answers MOVED and is not counted; served counts the others,
// missing those whose value is not the writer's.
func readCopies(t *testing.T, addr, password string, tlsConfig *tls.Config, keys []string) (served int, missing []string, firstErr error) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password, MaxRetries: -1, TLSConfig: tlsConfig, PoolSize: 1,
		OnConnect: func(ctx context.Context, cn *goredis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	defer func() { _ = c.Close() }()
	for start := 0; start < len(keys); start += 1000 {
		batch := keys[start:min(start+1000, len(keys))]
		cmds, err := getAll(t, c, batch)
		if err != nil && !strings.HasPrefix(err.Error(), "MOVED ") && !errors.Is(err, goredis.Nil) {
			return served, append(missing, batch...), err
		}
		for i, cmd := range cmds {
			v, err := cmd.Int()
			switch {
			case err != nil && strings.HasPrefix(err.Error(), "MOVED "):
			case err != nil || "w:"+strconv.Itoa(v) != batch[i]:
				served++
				if firstErr == nil {
					firstErr = fmt.Errorf("GET %s at %s: %d, %w", batch[i], addr, v, err)
				}
				missing = append(missing, batch[i])
			default:
				served++
			}
		}
	}
	return served, missing, firstErr
}

// KeySlot is the hash slot of key, as Redis Cluster computes it (rdbload.KeySlot).
func KeySlot(key string) int { return rdbload.KeySlot(key) }

// readThrough GETs keys at the node at addr in pipelined batches, follows MOVED redirects
// (up to 3, as go-redis does) to the nodes they name, and returns the keys whose value is
// not what the writer wrote (w:<n> = n), with the first error seen.
func readThrough(t *testing.T, addr, password string, tlsConfig *tls.Config, keys []string) ([]string, error) {
	t.Helper()
	clients := map[string]*goredis.Client{}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	at := func(a string) *goredis.Client {
		if clients[a] == nil {
			clients[a] = goredis.NewClient(&goredis.Options{Addr: a, Password: password, MaxRetries: -1, TLSConfig: tlsConfig})
		}
		return clients[a]
	}
	var missing []string
	var firstErr error
	for start := 0; start < len(keys); start += 1000 {
		pending := map[string][]string{addr: keys[start:min(start+1000, len(keys))]}
		for hop := 0; hop <= 3 && len(pending) > 0; hop++ {
			next := map[string][]string{}
			for node, ks := range pending {
				var cmds []*goredis.StringCmd
				// A connection the server closed (EOF, reset) is retried on a new one, as every
				// client does; a wrong value or a refusal is not.
				for try := 0; try < 3; try++ {
					var err error
					if cmds, err = getAll(t, at(node), ks); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				for i, cmd := range cmds {
					v, err := cmd.Int()
					switch {
					case err != nil && strings.HasPrefix(err.Error(), "MOVED ") && hop < 3:
						f := strings.Fields(err.Error())
						next[f[len(f)-1]] = append(next[f[len(f)-1]], ks[i])
					case err != nil || ks[i][strings.IndexByte(ks[i], ':')+1:] != strconv.Itoa(v): // w:7 = 7, p:7 = 7
						if firstErr == nil {
							firstErr = fmt.Errorf("GET %s at %s: %d, %w", ks[i], node, v, err)
						}
						missing = append(missing, ks[i])
					}
				}
			}
			pending = next
		}
	}
	return missing, firstErr
}

// LogEvents logs the namespace's events, oldest first, to explain a failure.
func LogEvents(t *testing.T, c client.Client, ns string) {
	t.Helper()
	evs := &eventsv1.EventList{}
	if err := c.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
		t.Logf("cannot list events: %v", err)
		return
	}
	sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].CreationTimestamp.Before(&evs.Items[j].CreationTimestamp) })
	for _, e := range evs.Items {
		t.Logf("event %s %s %s: %s", e.CreationTimestamp.Format("15:04:05"), e.Type, e.Reason, e.Note)
	}
}
