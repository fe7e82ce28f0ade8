package gc

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// RunState is where a requested collection is.
type RunState string

// The states of a requested collection: queued, then running, then one of the three that end it.
const (
	// RunQueued is a request admitted, waiting for its namespace's next run.
	RunQueued RunState = "queued"
	// RunRunning is a request taken by a run that holds (or is taking) the namespace's Lease.
	RunRunning RunState = "running"
	// RunSucceeded is a run that ended and judged each id asked for (deleted, held or kept,
	// each record says why).
	RunSucceeded RunState = "succeeded"
	// RunFailed is a run that failed (no plan, the mass-deletion guard, the lock, the
	// store, ...): Run.Error says why.
	RunFailed RunState = "failed"
	// RunStopped is a request whose process was asked to stop: before its run nothing was
	// done; during it, what was done is in its records. Run.Error says which.
	RunStopped RunState = "stopped"
)

// Done reports whether nothing more happens to a request in this state.
func (s RunState) Done() bool {
	return s == RunSucceeded || s == RunFailed || s == RunStopped
}

// Decision is what gc decided for a resource.
type Decision string

// The decisions of a plan or a run.
const (
	// DecisionDelete is an orphan past its grace period: deleted (a dry run's: would be).
	// Record.Result says what the delete did.
	DecisionDelete Decision = "delete"
	// DecisionHeld is an orphan still within its grace period, until Judged.Until.
	DecisionHeld Decision = "held"
	// DecisionKept is a resource of a live session (gc reads its row as not terminal).
	DecisionKept Decision = "kept"
	// DecisionDeferred is an orphan beyond this run's cap: the next run takes it.
	DecisionDeferred Decision = "deferred"
	// DecisionUnrequested is an orphan of a session a requested collection did not name: left
	// for a scheduled run, or a request that names it.
	DecisionUnrequested Decision = "unrequested"
	// DecisionSkipped is a resource not judged: being deleted, or without a usable session id.
	DecisionSkipped Decision = "skipped"
	// DecisionProtected is a resource spared by the protect label: never deleted.
	DecisionProtected Decision = "protected"
	// DecisionExcluded is a resource spared by the exclude selector: never deleted.
	DecisionExcluded Decision = "excluded"
)

// Result is what came of one object: of its delete (Record.Result) or of its restore
// (Restored.Result). The fixed results are constants; the others are text that says why after
// a prefix, tested with Failed, NotStarted and Changed:
//
//   - a delete: ResultDeleted, ResultWouldDelete (a dry run), `changed: skipped, re-checked
//     next run` (the object changed or went since it was listed), `failed: WHY` (the delete
//     failed or was not sent), `not started: WHY` (the run was asked to stop before it: not a
//     failure, the next run judges the object again); empty for a resource not deleted.
//   - a restore: ResultCreated, ResultWouldCreate (a dry run), ResultExists (an object of
//     that name exists: left as it is), `failed: WHY`.
type Result string

// The fixed results of a delete and of a restore.
const (
	// ResultDeleted is an object deleted (archived first, in a live run).
	ResultDeleted Result = "deleted"
	// ResultWouldDelete is a dry run's delete the API server accepted.
	ResultWouldDelete Result = "would delete"
	// ResultCreated is an object created again from its archive.
	ResultCreated Result = "created"
	// ResultWouldCreate is a dry run's create the API server accepted.
	ResultWouldCreate Result = "would create"
	// ResultExists is an archived object of which one of the same name exists now: left as it is.
	ResultExists Result = "exists"
)

// Failed reports whether the delete or the create failed (or was not sent); the text says why.
func (r Result) Failed() bool { return strings.HasPrefix(string(r), "failed") }

// NotStarted reports whether a delete was not sent because the run was asked to stop: not a
// failure, the next run judges the object again.
func (r Result) NotStarted() bool { return strings.HasPrefix(string(r), "not started:") }

// Changed reports whether a delete was not sent because the object changed or went since it
// was listed: the next run judges it again.
func (r Result) Changed() bool { return strings.HasPrefix(string(r), "changed:") }

// UnixTime is an instant the API writes as a number of seconds since the epoch, with a
// fraction (Judged.Until). The zero UnixTime is no instant: gc writes null for a grace period
// whose end it cannot know (a resource without a creation time is held until one is known).
type UnixTime struct {
	time.Time
}

// UnmarshalJSON decodes a number of seconds since the epoch, or null (the zero UnixTime).
func (t *UnixTime) UnmarshalJSON(text []byte) error {
	if string(text) == "null" {
		*t = UnixTime{}
		return nil
	}
	var seconds float64
	if err := json.Unmarshal(text, &seconds); err != nil {
		return fmt.Errorf("gc: seconds since the epoch: %w", err)
	}
	// Beyond what a time.Time holds in nanoseconds: no instant this client can say.
	if math.Abs(seconds) > 1<<62/1e9 {
		return fmt.Errorf("gc: seconds since the epoch %s: out of range", text)
	}
	whole, fraction := math.Modf(seconds)
	t.Time = time.Unix(int64(whole), int64(math.Round(fraction*1e9))).UTC()
	return nil
}

// MarshalJSON writes the seconds since the epoch, or null for the zero UnixTime.
func (t UnixTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	seconds := float64(t.Unix()) + float64(t.Nanosecond())/1e9
	return strconv.AppendFloat(nil, seconds, 'f', -1, 64), nil
}

// Status is `GET /v1/status`.
type Status struct {
	// Version is gc's release.
	Version string `json:"version"`
	// Namespaces are the namespaces collected.
	Namespaces []string `json:"namespaces"`
	// Requests are, per namespace, its queue and its latest request (without records).
	Requests []Lane `json:"requests"`
	// Leases are, per namespace, who holds its run lock now.
	Leases []Lease `json:"leases"`
}

// Lease is who holds a namespace's run lock: a run of gc's process, of another replica, of the
// CronJob (a collection asked for meanwhile is answered ErrBusy after a wait).
type Lease struct {
	Namespace string `json:"namespace"`
	// Holder is nil when nobody holds it (or, with Error, when it could not be read).
	Holder *string `json:"holder"`
	// Until is when the hold ends unless renewed (nil: nobody holds it).
	Until *time.Time `json:"until"`
	// Error says why the Lease could not be read (nil: it was).
	Error *string `json:"error"`
}

// Lane is a namespace's requests.
type Lane struct {
	Namespace string `json:"namespace"`
	// Queued counts the requests waiting for the namespace's next run.
	Queued int `json:"queued"`
	// Last is the latest request (without its records), nil before the first.
	Last *Run `json:"last"`
}

// Judged is one resource as a plan or a run judged it: its metadata, its decision and why.
type Judged struct {
	// APIVersion is `group/version`, or `version` for the core group.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	// ResourceVersion is the resource's metadata.resourceVersion when it was listed.
	ResourceVersion string `json:"resourceVersion"`
	// Created is its metadata.creationTimestamp (nil: none).
	Created *time.Time `json:"created"`
	// Deleting is whether its metadata.deletionTimestamp is set.
	Deleting bool `json:"deleting"`
	// Session is the session id of its label (empty: none).
	Session string `json:"session"`
	// Decision is what gc decided.
	Decision Decision `json:"decision"`
	// Reason says why.
	Reason string `json:"reason"`
	// Until is when the grace period of a held resource ends (DecisionHeld); zero for every
	// other decision, and for a held resource whose creation time is unknown.
	Until UnixTime `json:"until"`
}

// Plan is what a collection would do now, before any delete.
type Plan struct {
	// Judged is every resource scanned, with its decision, in scan order.
	Judged []Judged `json:"judged"`
	// Scanned counts the resources scanned.
	Scanned int `json:"scanned"`
	// Orphans counts the orphans (held, due and deferred).
	Orphans int `json:"orphans"`
	// Spared counts the resources spared by the protect label, the exclude selector, or a claim's
	// name that is not its session's (protected).
	Spared int `json:"spared"`
	// UnknownStates are the rows in a state that is neither live nor terminal (when live states
	// are configured): each such state with the number of session ids in it. Their resources
	// are kept; a state the application added shows here instead of passing unseen.
	UnknownStates map[string]int `json:"unknownStates"`
	// MissingKinds are kinds that could not be scanned because their definition is not
	// installed.
	MissingKinds []string `json:"missingKinds"`
	// Lookups counts the database round trips made.
	Lookups int `json:"lookups"`
}

// Record is one audit record of a run: a resource, its decision, and what its delete did.
type Record struct {
	Judged
	// Cluster is the cluster id of the run.
	Cluster string `json:"cluster"`
	// Namespace is the resource's namespace.
	Namespace string `json:"namespace"`
	// Result is what the delete did (DecisionDelete); empty for every other decision.
	Result Result `json:"result"`
	// Archive is where the resource's manifest was archived before its delete (empty: no
	// delete was sent, or a dry run, which archives nothing).
	Archive string `json:"archive"`
	// DryRun says whether the run was a dry run.
	DryRun bool `json:"dryRun"`
}

// Requested are the sessions a request asked for: every session of its namespace (All, as
// CollectAll asks), or the IDs named (CollectSessions). In JSON it is `"all"` or
// `{"ids": [...]}`.
type Requested struct {
	// All is a request for every session of the namespace, as a scheduled run.
	All bool `json:"-"`
	// IDs are the sessions named, when not All.
	IDs []string `json:"ids"`
}

// UnmarshalJSON decodes `"all"` or `{"ids": [...]}`.
func (r *Requested) UnmarshalJSON(text []byte) error {
	var all string
	if json.Unmarshal(text, &all) == nil {
		if all != "all" {
			return fmt.Errorf("gc: sessions requested: %q is neither \"all\" nor a list of ids", all)
		}
		*r = Requested{All: true}
		return nil
	}
	var ids struct {
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal(text, &ids); err != nil {
		return fmt.Errorf("gc: sessions requested: %w", err)
	}
	*r = Requested{IDs: ids.IDs}
	return nil
}

// MarshalJSON writes `"all"` or `{"ids": [...]}`, as the API does.
func (r Requested) MarshalJSON() ([]byte, error) {
	if r.All {
		return []byte(`"all"`), nil
	}
	ids := r.IDs
	if ids == nil {
		ids = []string{}
	}
	return json.Marshal(struct {
		IDs []string `json:"ids"`
	}{ids})
}

// Run is a requested collection, as `GET /v1/runs/{id}` shows it.
type Run struct {
	// ID names the request for Client.Run, in the process that answered it (requests are kept
	// in memory: after gc restarts, an earlier id is ErrNotFound, never another request's).
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	// Sessions are the sessions asked for.
	Sessions Requested `json:"sessions"`
	// RequestedBy is who asked (the caller's Kubernetes user name).
	RequestedBy string `json:"requestedBy"`
	// State is where it is.
	State RunState `json:"state"`
	// RequestedAt is when it was asked for.
	RequestedAt time.Time `json:"requestedAt"`
	// EndedAt is when its run ended (nil: not yet).
	EndedAt *time.Time `json:"endedAt"`
	// Error says why it failed or stopped (nil: it did neither).
	Error *string `json:"error"`
	// Records are the audit records of the sessions it asked for (the same records as the
	// audit log), once it ran.
	Records []Record `json:"records"`
}

// Done reports whether nothing more happens to the run: it succeeded, failed or stopped.
func (r *Run) Done() bool {
	return r.State.Done()
}

// Restored is what came of one archived object of a restored session.
type Restored struct {
	Session string `json:"session"`
	// APIVersion is the object's (empty when the session has no archive at all).
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// ArchivedUID is the uid of the object archived.
	ArchivedUID string `json:"archivedUid"`
	// UID is the new object's (or the one a dry run would create; nil: none).
	UID *string `json:"uid"`
	// Result is ResultCreated, ResultWouldCreate (a dry run), ResultExists (left as it is) or
	// `failed: WHY` (Result.Failed).
	Result Result `json:"result"`
	// Note says what else was done or is owed (a kept volume bound, its policy given back).
	Note *string `json:"note"`
}

// Restoration is what a restore did.
type Restoration struct {
	Session     string `json:"session"`
	DryRun      bool   `json:"dryRun"`
	RequestedBy string `json:"requestedBy"`
	// RestoredAs is the account the objects were created as (gc's restore account).
	RestoredAs string `json:"restoredAs"`
	// Failed counts the objects not restored; each says why in Objects.
	Failed  int        `json:"failed"`
	Objects []Restored `json:"objects"`
}

// Archive is the receipt of one archived object: where its manifest is and what verifies it.
type Archive struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	// RunAt is the instant of the run that archived it.
	RunAt time.Time `json:"runAt"`
	// URI is where its manifest is.
	URI string `json:"uri"`
	// SHA256 and Bytes verify the manifest.
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	// RetainedVolume is a deleted claim's volume gc kept (nil: none), VolumePolicy its reclaim
	// policy before.
	RetainedVolume *string `json:"retainedVolume"`
	VolumePolicy   *string `json:"volumePolicy"`
}

// Archives are a session's receipts, newest first.
type Archives struct {
	Session  string    `json:"session"`
	Archives []Archive `json:"archives"`
}
