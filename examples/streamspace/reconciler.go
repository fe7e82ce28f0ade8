// Command streamspace is StreamSpace's session reconciler as it would be with gc: where the
// reconciler ends a session (`UPDATE sessions SET state='terminated' ...`) and used to log a
// `kubectl delete deployment,service -n NS -l session=ID` for an operator to run, it asks gc to
// collect that session now and follows the run; gc archives and deletes the session's
// Deployment, Service, claims and `Session` (keeping their volumes), and can bring them back.
//
//	streamspace -gc-url https://gc-sessions.streamspace.svc:9443 -token-file /var/run/secrets/gc/token
//	streamspace -once ...              one pass, then exit (a Job, a test)
//	streamspace restore SESSION ...    create the session's objects again from gc's archives
//
// The database is StreamSpace's: DB_HOST, DB_PORT, DB_USER, DB_PASSWORD, DB_NAME, DB_SSL_MODE
// (the names StreamSpace's API code reads), or DATABASE_URL. A session is ended when its row's
// state is one of -terminal-state (terminated, failed, deleted: the states StreamSpace's
// reconciler writes, and its soft delete).
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	gc "gc.stream.space/client"
	"github.com/lib/pq"
)

// Reconciler asks gc to collect each session whose row went terminal, once per session.
type Reconciler struct {
	DB             *sql.DB
	GC             *gc.Client
	Namespace      string
	TerminalStates []string
	Log            *log.Logger
	// Poll is how often a run is followed until it ends.
	Poll time.Duration

	// collected are the terminated sessions gc reported collected: every object of theirs
	// deleted (or never gc's to delete). Forgotten once their row is no longer terminal.
	collected map[string]bool
}

// Terminated is the sessions whose row is in a terminal state.
func (r *Reconciler) Terminated(ctx context.Context) ([]string, error) {
	rows, err := r.DB.QueryContext(ctx,
		`SELECT id FROM sessions WHERE state = ANY($1) ORDER BY id`, pq.Array(r.TerminalStates))
	if err != nil {
		return nil, fmt.Errorf("terminated sessions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Once is one pass: each terminated session not yet collected is asked for, its run followed.
// A session gc could not take now (another run holds the namespace, its queue is full) or
// still holds is asked for again on the next pass; nothing is deleted on this program's word
// alone: gc judges each id against the database with its operator's settings.
func (r *Reconciler) Once(ctx context.Context) error {
	if r.collected == nil {
		r.collected = map[string]bool{}
	}
	ids, err := r.Terminated(ctx)
	if err != nil {
		return err
	}
	terminated := map[string]bool{}
	for _, id := range ids {
		terminated[id] = true
	}
	for id := range r.collected {
		if !terminated[id] {
			delete(r.collected, id)
		}
	}
	for _, id := range ids {
		if r.collected[id] {
			continue
		}
		run, err := r.GC.CollectSessions(ctx, r.Namespace, []string{id})
		var refusal *gc.APIError
		switch {
		case errors.Is(err, gc.ErrBusy) || errors.Is(err, gc.ErrQueueFull) || errors.Is(err, gc.ErrUnavailable):
			errors.As(err, &refusal)
			r.Log.Printf("session %s: gc cannot take it now (%v); again in %s at the latest", id, err, refusal.RetryAfter)
			continue
		case err != nil:
			return fmt.Errorf("session %s: %w", id, err)
		}
		runID := run.ID
		for !run.Done() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.Poll):
			}
			if run, err = r.GC.Run(ctx, runID); err != nil {
				return fmt.Errorf("session %s: run %s: %w", id, runID, err)
			}
		}
		done := run.State == gc.RunSucceeded
		for _, rec := range run.Records {
			r.Log.Printf("session %s: %s %s %s: %s %s", id, rec.Decision, rec.Kind, rec.Name, rec.Result, rec.Reason)
			if !settled(rec) {
				done = false
			}
		}
		if run.Error != nil {
			r.Log.Printf("session %s: run %s %s: %s", id, run.ID, run.State, *run.Error)
		}
		if !done {
			r.Log.Printf("session %s: not collected yet (run %s %s): asked again on the next pass", id, run.ID, run.State)
		}
		r.collected[id] = done
	}
	return nil
}

// settled says whether nothing more is to be asked of gc for a record: its object deleted, or
// never gc's to delete (protected, excluded, skipped); a kept volume is gc's to give back
// later. Held (within the grace), deferred (over the cap), kept (gc reads the row as not
// terminal, a replica behind, say) or a delete that did not happen: ask again.
func settled(rec gc.Record) bool {
	switch {
	case rec.Kind == "PersistentVolume":
		return true
	case rec.Decision == gc.DecisionDelete:
		return rec.Result == gc.ResultDeleted
	default:
		return rec.Decision == gc.DecisionProtected || rec.Decision == gc.DecisionExcluded || rec.Decision == gc.DecisionSkipped
	}
}

// ErrStillTerminated refuses a restore of a session whose row is still terminal: the next pass
// (or gc's CronJob) would collect it again.
var ErrStillTerminated = errors.New("its row is still in a terminal state: put the session's row back first, or it is collected again")

// Restore creates the archived objects of session again, as gc's restore account, once its row
// is no longer terminal.
func (r *Reconciler) Restore(ctx context.Context, session string, dryRun bool) (*gc.Restoration, error) {
	var state sql.NullString
	err := r.DB.QueryRowContext(ctx, `SELECT state FROM sessions WHERE id = $1`, session).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("session %s: no row: %w", session, ErrStillTerminated)
	case err != nil:
		return nil, fmt.Errorf("session %s: %w", session, err)
	}
	for _, terminal := range r.TerminalStates {
		if state.Valid && state.String == terminal {
			return nil, fmt.Errorf("session %s (%s): %w", session, state.String, ErrStillTerminated)
		}
	}
	archives, err := r.GC.Archives(ctx, r.Namespace, session)
	if err != nil {
		return nil, err
	}
	for _, a := range archives.Archives {
		r.Log.Printf("session %s: archived %s %s (%d bytes, sha256 %s) at %s", session, a.Kind, a.Name, a.Bytes, a.SHA256, a.RunAt.Format(time.RFC3339))
	}
	restored, err := r.GC.Restore(ctx, r.Namespace, session, gc.RestoreOptions{DryRun: dryRun, BindWait: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	r.Log.Printf("session %s: restored as %s, asked by %s", session, restored.RestoredAs, restored.RequestedBy)
	for _, o := range restored.Objects {
		note := ""
		if o.Note != nil {
			note = " (" + *o.Note + ")"
		}
		r.Log.Printf("session %s: %s %s: %s%s", session, o.Kind, o.Name, o.Result, note)
	}
	if restored.Failed > 0 {
		return restored, fmt.Errorf("session %s: %d object(s) not restored", session, restored.Failed)
	}
	return restored, nil
}
