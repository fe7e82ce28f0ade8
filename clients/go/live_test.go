package gc

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"
)

// Against a real `gc-cli serve --api-listen` on the test bed (gc-cli/tests/sessions.rs runs it
// with these variables set; skipped without them): the session GC_API_SESSION of GC_API_NAMESPACE,
// whose row went terminal, is collected through the client, its objects deleted and archived;
// a stranger is refused, a forged token is not authenticated, and bad input names its field.
func TestLive(t *testing.T) {
	base := os.Getenv("GC_API_URL")
	if base == "" {
		t.Skip("GC_API_URL is not set")
	}
	ns, session := os.Getenv("GC_API_NAMESPACE"), os.Getenv("GC_API_SESSION")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := New(base, WithTokenFile(os.Getenv("GC_API_TOKEN_FILE")))
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := New(base, WithToken(os.Getenv("GC_API_STRANGER_TOKEN")))
	if _, err := stranger.CollectSessions(ctx, ns, []string{session}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a stranger: %v", err)
	}
	forged, _ := New(base, WithToken("forged"))
	if _, err := forged.CollectSessions(ctx, ns, []string{session}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a forged token: %v", err)
	}
	var refusal *APIError
	if _, err := c.CollectSessions(ctx, ns, []string{"not an id"}); !errors.As(err, &refusal) || refusal.Field != "sessions[0]" {
		t.Fatalf("a bad id: %v", err)
	}
	run, err := c.CollectSessions(ctx, ns, []string{session})
	if err != nil {
		t.Fatal(err)
	}
	for !run.Done() {
		time.Sleep(200 * time.Millisecond)
		if run, err = c.Run(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if run.State != RunSucceeded {
		t.Fatalf("%+v", run)
	}
	// `get status` is cluster-wide (a ClusterRoleBinding): this caller, bound in its namespace
	// only, may not.
	if _, err := c.Status(ctx); !errors.Is(err, ErrForbidden) {
		t.Fatalf("status: %v", err)
	}
	deleted := 0
	for _, r := range run.Records {
		if r.Session != session {
			t.Fatalf("a record of another session: %+v", r)
		}
		if r.Result == ResultDeleted && r.Archive != "" {
			deleted++
		}
	}
	if want := os.Getenv("GC_API_DELETES"); want != "" && want != strconv.Itoa(deleted) {
		t.Fatalf("%d deleted, want %s: %+v", deleted, want, run.Records)
	}
}
