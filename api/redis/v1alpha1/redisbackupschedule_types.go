package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MinScheduleInterval is the shortest time between two runs of a RedisBackupSchedule: the
// API server refuses a spec.schedule that runs more often where its rules can tell, and the
// operator refuses the others (condition Scheduled False, ScheduleInvalid) before creating
// any backup. A backup forks every shard's node and copies all of its data; runs closer
// than this would queue behind one another (a run waits for the one under way) and keep the
// operator's two backup workers, shared by every tenant, busy with one schedule.
const MinScheduleInterval = 5 * time.Minute

// BackupRetention says which of a schedule's completed backups to keep. The newest
// completed backup is always kept.
type BackupRetention struct {
	// Count keeps at most this many completed backups, the newest.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Count *int32 `json:"count,omitempty"`
	// MaxAge deletes completed backups older than this (a duration such as 168h).
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="spec.keep.maxAge must be a positive duration of hours, minutes and seconds, for example 168h or 720h"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// RedisBackupScheduleSpec says when to back up a RedisCluster and how many backups to keep.
// +kubebuilder:validation:XValidation:rule="self.cluster == oldSelf.cluster",message="spec.cluster cannot change: create a new RedisBackupSchedule for another cluster"
type RedisBackupScheduleSpec struct {
	// Cluster is the name of the RedisCluster to back up, in the same namespace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.cluster must be a RedisCluster's name (lowercase letters, digits and '-'), for example cache"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster"
	Cluster string `json:"cluster"`
	// Schedule is when to back up, in cron syntax (minute hour day-of-month month
	// day-of-week, in UTC), a descriptor (@hourly, @daily, @weekly, @monthly) or @every
	// <duration> (for example @every 6h). Runs are at least 5 minutes apart: @every below
	// 5m, and a minute field whose minutes are closer than 5 (also across the hour, as 58
	// and 1), are refused.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+|[0-9*,/-]+( +[0-9A-Za-z*?,/-]+){4})$')",message="spec.schedule must be five cron fields (minute hour day-of-month month day-of-week, in UTC; for example 0 3 * * * for 03:00 daily), @hourly, @daily, @weekly, @monthly, or @every <duration> (for example @every 6h)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^@every ([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self.substring(7)) >= duration('5m')",message="spec.schedule @every runs more often than every 5 minutes, the shortest interval the operator takes backups at: use @every 5m or longer"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9*,/-]+ ') || self.split(' ')[0].matches('^[0-9]+$') || (self.split(' ')[0].matches('^[*]/[0-9]+$') && int(self.split(' ')[0].substring(2)) >= 5 && 60 - (59 / int(self.split(' ')[0].substring(2))) * int(self.split(' ')[0].substring(2)) >= 5) || (self.split(' ')[0].matches('^[0-9]+(,[0-9]+)+$') && self.split(' ')[0].split(',').all(a, self.split(' ')[0].split(',').all(b, int(a) == int(b) || (int(a) - int(b) >= 5 && int(a) - int(b) <= 55) || (int(b) - int(a) >= 5 && int(b) - int(a) <= 55)))) || (self.split(' ')[0].matches('^[0-9]+-[0-9]+$') && int(self.split(' ')[0].split('-')[0]) >= int(self.split(' ')[0].split('-')[1])) || !self.split(' ')[0].matches('^([0-9]+|[*](/[0-9]+)?|[0-9]+(,[0-9]+)+|[0-9]+-[0-9]+)$')",message="spec.schedule runs more often than every 5 minutes, the shortest interval the operator takes backups at: its minute field must name minutes at least 5 apart, across the hour too (for example 0, 0,30 or */15, not * or */2)"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Schedule"
	Schedule string `json:"schedule"`
	// Destination is where the backups go (see RedisBackup's).
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Destination"
	Destination ObjectStore `json:"destination"`
	// Keep says which completed backups to keep; without it, every backup is kept.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Keep"
	Keep *BackupRetention `json:"keep,omitempty"`
	// ReclaimPolicy of the backups the schedule creates: Delete (the default) removes a
	// backup's files when retention deletes it; Retain keeps them in the bucket.
	// +kubebuilder:default=Delete
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Reclaim Policy"
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
	// Suspend stops creating backups (those under way finish); retention still applies.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suspend"
	Suspend bool `json:"suspend,omitempty"`
}

// RedisBackupScheduleStatus is what the schedule did.
type RedisBackupScheduleStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed Generation"
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastScheduleTime is the scheduled time of the last backup created.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last Schedule"
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime is when the next backup is due.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Next Schedule"
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// LastCompletedBackup is the newest Completed backup of the schedule.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last Completed Backup"
	LastCompletedBackup string `json:"lastCompletedBackup,omitempty"`
	// Backups is how many RedisBackups of the schedule exist.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Backups"
	Backups int32 `json:"backups,omitempty"`
	// Conditions: Scheduled (False when spec.schedule cannot be parsed, or a backup could not
	// be created).
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RedisBackupSchedule creates RedisBackups of a RedisCluster on a cron schedule and deletes
// the completed ones its retention does not keep.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rbks,categories=all;middleware
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Backups",type=integer,JSONPath=`.status.backups`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Redis Backup Schedule",resources={{RedisBackup,v1alpha1}}
type RedisBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is when to back up and what to keep.
	// +required
	Spec RedisBackupScheduleSpec `json:"spec"`
	// Status is what the schedule did.
	// +optional
	Status RedisBackupScheduleStatus `json:"status,omitempty"`
}

// RedisBackupScheduleList is a list of RedisBackupSchedules.
// +kubebuilder:object:root=true
type RedisBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the RedisBackupSchedules.
	Items []RedisBackupSchedule `json:"items"`
}
