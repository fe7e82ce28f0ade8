package gc

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Each refusal is an *APIError matching its sentinel, with the server's message, field and
// Retry-After.
func TestRefusalsAreTypedErrors(t *testing.T) {
	cases := []struct {
		status int
		want   error
		retry  string
	}{
		{400, ErrBadRequest, ""}, {401, ErrUnauthorized, ""}, {403, ErrForbidden, ""},
		{404, ErrNotFound, ""}, {409, ErrBusy, "30"}, {422, ErrRefused, ""},
		{429, ErrQueueFull, "5"}, {501, ErrNotOffered, ""}, {503, ErrUnavailable, "5"},
	}
	for _, tc := range cases {
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.retry != "" {
				w.Header().Set("Retry-After", tc.retry)
			}
			w.WriteHeader(tc.status)
			json.NewEncoder(w).Encode(map[string]string{"error": "why", "field": "sessions[1]"})
		}))
		c, err := New(server.URL, WithToken("t"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CollectSessions(context.Background(), "streamspace", []string{"a"})
		var refusal *APIError
		if !errors.As(err, &refusal) || !errors.Is(err, tc.want) {
			t.Fatalf("%d: %v", tc.status, err)
		}
		if refusal.Message != "why" || refusal.Field != "sessions[1]" || refusal.StatusCode != tc.status {
			t.Fatalf("%d: %+v", tc.status, refusal)
		}
		if tc.retry != "" && refusal.RetryAfter == 0 {
			t.Fatalf("%d: no Retry-After: %+v", tc.status, refusal)
		}
		for _, other := range cases {
			if other.want != tc.want && errors.Is(err, other.want) {
				t.Fatalf("%d is also %v", tc.status, other.want)
			}
		}
		server.Close()
	}
}

// The token is read from its file, and again when the kubelet rotates it.
func TestTheTokenFileIsReadAgainWhenItChanges(t *testing.T) {
	seen := make(chan string, 2)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		json.NewEncoder(w).Encode(Status{Version: "1", Namespaces: []string{"streamspace"}})
	}))
	defer server.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(server.URL, WithTokenFile(file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	rotated := file + ".new"
	if err := os.WriteFile(rotated, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(rotated, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rotated, file); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first, second := <-seen, <-seen; first != "Bearer first" || second != "Bearer second" {
		t.Fatalf("%q, %q", first, second)
	}
	if _, err := New(server.URL, WithTokenFile(filepath.Join(t.TempDir(), "none"))); err == nil {
		t.Fatal("a missing token file is an error")
	}
}

// Over TLS, the CA bundle given is trusted, and only it.
func TestTheCABundleIsTrusted(t *testing.T) {
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(Status{Version: "1"})
	}))
	defer server.Close()
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	if err := os.WriteFile(bundle, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	trusting, err := New(server.URL, WithCABundle(bundle))
	if err != nil {
		t.Fatal(err)
	}
	if status, err := trusting.Status(context.Background()); err != nil || status.Version != "1" {
		t.Fatalf("%v %v", status, err)
	}
	stranger, _ := New(server.URL)
	if _, err := stranger.Status(context.Background()); err == nil {
		t.Fatal("a server outside the bundle is trusted")
	}
	if _, err := New("ftp://x"); err == nil {
		t.Fatal("a base URL that is not http(s) is refused")
	}
}

// An empty list of sessions is refused here: it would ask for every session.
func TestAnEmptyListCollectsNothing(t *testing.T) {
	c, _ := New("http://127.0.0.1:1")
	if _, err := c.CollectSessions(context.Background(), "streamspace", nil); !errors.Is(err, ErrNoSession) {
		t.Fatal(err)
	}
}

// A restore sends its options as the server takes them, a session's archives are asked for by
// a query the server decodes, and both answers decode.
func TestRestoreAndArchivesSendWhatTheServerTakes(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.EscapedPath() == "/v1/namespaces/streamspace/sessions/alice-0a/restore":
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body["dryRun"] != true || body["bindWaitSeconds"] != 30.0 {
				t.Errorf("restore body: %v %v", body, err)
			}
			w.Write([]byte(`{"session":"alice-0a","dryRun":true,"requestedBy":"me","restoredAs":"system:serviceaccount:gc:gc-restore","failed":0,
				"objects":[{"session":"alice-0a","apiVersion":"apps/v1","kind":"Deployment","name":"d","archivedUid":"u1","uid":null,"result":"would create","note":null}]}`))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/namespaces/streamspace/archives":
			if got := r.URL.Query()["session"]; len(got) != 1 || got[0] != "alice-0a" || len(r.URL.Query()) != 1 {
				t.Errorf("archives query: %v", r.URL.RawQuery)
			}
			w.Write([]byte(`{"session":"alice-0a","archives":[{"apiVersion":"v1","kind":"PersistentVolumeClaim","name":"c","uid":"u2",
				"runAt":"2026-12-04T00:00:00Z","uri":"file:///a","sha256":"ab","bytes":12,"retainedVolume":"pv-1","volumePolicy":"Delete"}]}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(404)
		}
	}))
	defer server.Close()
	c, _ := New(server.URL, WithToken("t"))
	ctx := context.Background()
	restored, err := c.Restore(ctx, "streamspace", "alice-0a", RestoreOptions{DryRun: true, BindWait: 30 * time.Second})
	if err != nil || !restored.DryRun || len(restored.Objects) != 1 || restored.Objects[0].Result != "would create" || restored.Objects[0].UID != nil {
		t.Fatalf("%+v %v", restored, err)
	}
	archives, err := c.Archives(ctx, "streamspace", "alice-0a")
	if err != nil || len(archives.Archives) != 1 || *archives.Archives[0].RetainedVolume != "pv-1" || archives.Archives[0].Bytes != 12 {
		t.Fatalf("%+v %v", archives, err)
	}
}
