// Package archiver runs the continuous archive of RedisClusters with spec.archive: one loop
// per shard, in the background of the leader, that takes the shard's base into the object
// store, follows its write stream there with a redisarchive.Follower, starts a new timeline
// after a gap, a change of slots or on schedule (each serving restores only once its reader
// has caught up), prunes what the retention no longer needs, and reports its status and
// events for the RedisCluster controller's next reconcile.
package archiver

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// The reasons of the archive's events (and ReasonFailing of its condition too).
const (
	// ReasonFailing: a shard's follower or base failed and is tried again.
	ReasonFailing = "ArchiveFailing"
	// ReasonGap: the history of a shard could not be continued; a new base starts the next
	// timeline (an event).
	ReasonGap = "ArchiveGap"
	// ReasonTimelineStarted: a shard's base was taken and its timeline starts (an event).
	ReasonTimelineStarted = "ArchiveTimelineStarted"
	// ReasonFlush: a shard's archive received a FLUSHALL or FLUSHDB (an event naming its
	// time, to which a restore just before undoes it).
	ReasonFlush = "ArchiveFlush"
	// ReasonPruned: spec.archive.retention deleted a shard's old timelines (an event);
	// ReasonPruneFailed: they could not be listed or deleted (a Warning event; tried again
	// at the shard's next base).
	ReasonPruned      = "ArchivePruned"
	ReasonPruneFailed = "ArchivePruneFailed"
)

// DefaultBaseEvery is spec.archive.BaseEvery when unset: a new base a day.
const DefaultBaseEvery = 24 * time.Hour

// Schedule is when a shard takes its next base and how long its archive is kept.
type Schedule struct {
	// BaseEvery is how often a shard starts a new timeline from a new base; Retention how
	// long the archive is kept (0: everything).
	BaseEvery, Retention time.Duration
}

// ScheduleOf reads spec.archive's schedule (a zero retention keeps everything).
func ScheduleOf(spec *redisv1alpha1.ArchiveSpec) Schedule {
	out := Schedule{BaseEvery: DefaultBaseEvery}
	if spec.BaseEvery != nil && spec.BaseEvery.Duration > 0 {
		out.BaseEvery = spec.BaseEvery.Duration
	}
	if spec.Retention != nil {
		out.Retention = spec.Retention.Duration
	}
	return out
}

// retryMax bounds the wait between two tries of a shard whose follower or base
// failed.
const retryMax = 30 * time.Second

// Registry runs the archives of the clusters with spec.archive: a loop per shard, in the
// background, from the leader's reconciles (only the leader reconciles). Each follower
// holds at most about 33 MiB (two segments of 16 MiB and a read buffer, see
// internal/redisarchive): the operator's memory grows by that much per archived shard.
type Registry struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*Cluster
}

// Cluster is the archive of one cluster: its store and its shards' followers.
type Cluster struct {
	// Destination is the store spec.archive named, Location where the archive is in it.
	Destination redisv1alpha1.ObjectStore
	Location    string
	// Shards are the shards' loops, in slot order.
	Shards []*Shard
	cancel context.CancelFunc
}

// Conn is how a shard's follower reaches the nodes.
type Conn struct {
	Login conn.Login
	TLS   *tls.Config
}

// Shard is one shard's follower loop and what it reports.
type Shard struct {
	cluster string
	name    string
	slots   []nodes.SlotRange
	sink    redisarchive.StoreSink

	mu     sync.Mutex
	source health.ShardSource
	// A replica's backlog begins where it last synced with its master, so a replica
	// restarted since the archive's end cannot continue the history while its master
	// (source.MasterAddr) still can: askMaster sends the next connection there, and
	// askedMaster says it went there.
	askMaster, askedMaster bool
	conn                   Conn
	schedule               Schedule
	timeline               int
	base                   backup.Shard
	// baseRetryAt postpones the next scheduled base after one failed.
	baseRetryAt time.Time
	// gapNoted is the timeline whose end the ArchiveGap event was sent for (only the loop
	// reads and writes it).
	gapNoted int
	// oldest is the capture time of the shard's oldest timeline kept in the archive.
	oldest time.Time
	// lastFlush is the receive time of the last FLUSHALL or FLUSHDB any of the shard's
	// followers received, lastFlushOffset the offset after it: a scheduled base's reader
	// receives again, at its catch-up's time, a flush the current one already had.
	lastFlush       time.Time
	lastFlushOffset int64
	follower        *redisarchive.Follower
	// last is the progress of the timeline's last follower, shown while the next starts.
	last     redisarchive.Progress
	starting bool
	stopped  bool
	lastErr  string
	events   []Event // not yet reported
	// lag is what Lag keeps between looks: when the archive last held all the node had, and
	// the timeline and offset the bytes archived were last counted at.
	lag lagState
}

// Event is an event a shard's loop leaves for the next reconcile to send.
type Event struct {
	Kind, Reason, Message string
	// At is the time of a flush (ReasonFlush): the shards' flushes make one event.
	At time.Time
}

// Get returns the running archive of cluster, nil when none runs.
func (a *Registry) Get(cluster types.NamespacedName) *Cluster {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clusters[cluster]
}

// put records the running archive of cluster.
func (a *Registry) put(cluster types.NamespacedName, ca *Cluster) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.clusters == nil {
		a.clusters = map[types.NamespacedName]*Cluster{}
	}
	a.clusters[cluster] = ca
}

// stopGrace is how long a stopped follower has to write its open segment before
// its context ends (it is then abandoned, as a crash would; the next start resumes where
// the last closed segment ends).
const stopGrace = 10 * time.Second

// Stop stops the followers of cluster: each writes its open segment and ends (a deleted
// cluster's last writes are archived).
func (a *Registry) Stop(cluster types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ca := a.clusters[cluster]
	if ca == nil {
		return
	}
	delete(a.clusters, cluster)
	for _, sh := range ca.Shards {
		sh.Stop()
	}
	time.AfterFunc(stopGrace, ca.cancel)
}

// Start opens cluster's archive: a loop per shard of sources (in slot order, named by
// redisarchive.ShardName), each running in the background until Stop, writing through sink.
func (a *Registry) Start(key types.NamespacedName, dest redisv1alpha1.ObjectStore, location string, sources []health.ShardSource,
	sink redisarchive.StoreSink, c Conn, schedule Schedule) *Cluster {
	loopCtx, cancel := context.WithCancel(context.Background())
	ca := &Cluster{Destination: dest, Location: location, cancel: cancel}
	for i, src := range sources {
		sh := &Shard{cluster: key.Name, name: redisarchive.ShardName(i), slots: src.Slots, sink: sink,
			source: src, conn: c, schedule: schedule, starting: true}
		ca.Shards = append(ca.Shards, sh)
		go sh.Run(loopCtx)
	}
	a.put(key, ca)
	return ca
}

// Name is the shard's name in the archive (shard-000 holds the first slots).
func (sh *Shard) Name() string { return sh.name }

// Slots are the slots the shard's loop archives.
func (sh *Shard) Slots() []nodes.SlotRange { return sh.slots }
