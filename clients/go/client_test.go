package gc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
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
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(Status{Version: "1"})
	}))
	server.Config.ErrorLog = log.New(io.Discard, "", 0) // the stranger's handshake, refused
	server.StartTLS()
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
	if err != nil || !restored.DryRun || len(restored.Objects) != 1 || restored.Objects[0].Result != ResultWouldCreate || restored.Objects[0].UID != nil {
		t.Fatalf("%+v %v", restored, err)
	}
	archives, err := c.Archives(ctx, "streamspace", "alice-0a")
	if err != nil || len(archives.Archives) != 1 || *archives.Archives[0].RetainedVolume != "pv-1" || archives.Archives[0].Bytes != 12 ||
		!archives.Archives[0].RunAt.Equal(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v %v", archives, err)
	}
}

// On error, every call answers nil and the error: a refusal, a transport error, an answer that
// is not what was expected.
func TestEveryCallAnswersNilOnError(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":"no"}`))
	}))
	defer refusing.Close()
	garbled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`["not", "an", "object"]`))
	}))
	defer garbled.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	ctx := context.Background()
	for _, base := range []string{refusing.URL, garbled.URL, gone.URL} {
		c, err := New(base, WithToken("t"))
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]func() (any, error){
			"Status":          func() (any, error) { return c.Status(ctx) },
			"PlanSessions":    func() (any, error) { return c.PlanSessions(ctx, "streamspace", []string{"a"}) },
			"CollectSessions": func() (any, error) { return c.CollectSessions(ctx, "streamspace", []string{"a"}) },
			"CollectAll":      func() (any, error) { return c.CollectAll(ctx, "streamspace") },
			"Run":             func() (any, error) { return c.Run(ctx, "r-1") },
			"Restore":         func() (any, error) { return c.Restore(ctx, "streamspace", "a", RestoreOptions{}) },
			"Archives":        func() (any, error) { return c.Archives(ctx, "streamspace", "a") },
		}
		for name, call := range calls {
			out, err := call()
			if err == nil || !reflect.ValueOf(out).IsNil() {
				t.Errorf("%s of %s: %#v, %v", name, base, out, err)
			}
		}
	}
	c, _ := New(refusing.URL)
	if run, err := c.CollectSessions(ctx, "streamspace", nil); run != nil || !errors.Is(err, ErrNoSession) {
		t.Errorf("%v %v", run, err)
	}
}

// Options change the client's own copy of the caller's *http.Client, never the caller's client
// nor its transport, whatever their order; the copy keeps the transport's settings.
func TestOptionsNeverChangeTheCallersHTTPClient(t *testing.T) {
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(Status{Version: "1"})
	}))
	server.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused below
	server.StartTLS()
	defer server.Close()
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	if err := os.WriteFile(bundle, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	dialer := &net.Dialer{}
	tlsConfig := &tls.Config{ServerName: "gc.invalid"}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, address)
		},
		TLSClientConfig: tlsConfig,
	}
	mine := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	for _, opts := range [][]Option{
		{WithHTTPClient(mine), WithTimeout(time.Minute), WithCABundle(bundle)},
		{WithCABundle(bundle), WithTimeout(time.Minute), WithHTTPClient(mine)},
	} {
		c, err := New(server.URL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if mine.Timeout != 5*time.Second || mine.Transport != transport || transport.TLSClientConfig != tlsConfig ||
			tlsConfig.RootCAs != nil || tlsConfig.ServerName != "gc.invalid" || tlsConfig.MinVersion != 0 {
			t.Fatalf("the caller's client changed: %+v, %+v", mine, tlsConfig)
		}
		if c.http == mine || c.http.Transport == transport || c.http.Timeout != time.Minute {
			t.Fatalf("the client's own: %+v", c.http)
		}
		// Its own copy: the caller's dialer, the bundle's roots (the caller's server name
		// from the URL's host when it is empty: here it is not, so the certificate for 127.0.0.1
		// is checked against gc.invalid and refused).
		before := dials.Load()
		if _, err := c.Status(context.Background()); err == nil || dials.Load() == before {
			t.Fatalf("the copy of the caller's transport is not used: %v", err)
		}
	}
	tlsConfig.ServerName = ""
	c, err := New(server.URL, WithHTTPClient(mine), WithCABundle(bundle))
	if err != nil {
		t.Fatal(err)
	}
	if status, err := c.Status(context.Background()); err != nil || status.Version != "1" {
		t.Fatalf("%v %v", status, err)
	}
	// Without options, the caller's client is used as it is (a copy of it).
	plain := &http.Client{Transport: http.DefaultTransport}
	c, err = New(server.URL, WithHTTPClient(plain))
	if err != nil || plain.Timeout != 0 || c.http.Timeout != 0 || c.http == plain {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := New(server.URL, WithHTTPClient(nil)); err == nil {
		t.Fatal("a nil *http.Client is refused")
	}
	custom := &http.Client{Transport: roundTripper(func(*http.Request) (*http.Response, error) { return nil, errors.New("no") })}
	if _, err := New(server.URL, WithHTTPClient(custom), WithCABundle(bundle)); err == nil || !strings.Contains(err.Error(), "not an *http.Transport") {
		t.Fatalf("a CA bundle for a transport it cannot set: %v", err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Plain http:// only to a loopback host: elsewhere the token would travel in clear.
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	for _, base := range []string{
		"http://127.0.0.1:9443", "http://127.3.2.1:9443", "http://[::1]:9443", "http://localhost:9443",
		"http://LOCALHOST", "https://gc-sessions.streamspace.svc:9443", "https://10.0.0.1:9443/prefix",
	} {
		if _, err := New(base); err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
	for _, base := range []string{
		"http://gc-sessions.streamspace.svc:9443", "http://10.0.0.1:9443", "http://[2001:db8::1]:9443",
		"http://128.0.0.1", "http://localhost.example.com", "http://0.0.0.0:9443",
	} {
		_, err := New(base)
		if err == nil || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "in clear") ||
			!strings.Contains(err.Error(), "https://") {
			t.Errorf("%s: %v", base, err)
		}
	}
	for _, base := range []string{"ftp://x", "gc-sessions:9443", "https://", "://"} {
		if _, err := New(base); err == nil {
			t.Errorf("%s is refused", base)
		}
	}
}

// The times of the answers decode: RFC 3339 strings as time.Time, a held resource's `until`
// (seconds since the epoch, a float) as a UnixTime, null or absent as none.
func TestTimesDecode(t *testing.T) {
	var run Run
	text := `{"id":"r","namespace":"n","sessions":{"ids":["a"]},"requestedBy":"me","state":"succeeded",
		"requestedAt":"2026-12-04T06:00:00Z","endedAt":"2026-12-04T06:00:02.5+01:00","error":null,
		"records":[
		 {"apiVersion":"v1","kind":"Service","name":"a","uid":"u1","resourceVersion":"7","created":"2026-12-03T06:00:00Z",
		  "deleting":false,"session":"a","decision":"held","reason":"within the grace period","until":1796364000.25,
		  "cluster":"c","namespace":"n","result":null,"archive":null,"dryRun":false},
		 {"apiVersion":"v1","kind":"Service","name":"b","uid":"u2","resourceVersion":"8","created":null,
		  "deleting":true,"session":null,"decision":"held","reason":"creation time unknown","until":null,
		  "cluster":"c","namespace":"n","result":null,"archive":null,"dryRun":false},
		 {"apiVersion":"v1","kind":"Service","name":"c","uid":"u3","resourceVersion":"9",
		  "deleting":false,"decision":"delete","reason":"gone","until":1796364000,
		  "cluster":"c","namespace":"n","result":"deleted","archive":"file:///c","dryRun":false},
		 {"apiVersion":"v1","kind":"Service","name":"d","uid":"u4","resourceVersion":"9",
		  "deleting":false,"decision":"kept","reason":"running",
		  "cluster":"c","namespace":"n","result":null,"archive":null,"dryRun":false}]}`
	if err := json.Unmarshal([]byte(text), &run); err != nil {
		t.Fatal(err)
	}
	if !run.RequestedAt.Equal(time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)) ||
		!run.EndedAt.Equal(time.Date(2026, 12, 4, 5, 0, 2, 5e8, time.UTC)) || run.Error != nil {
		t.Fatalf("%+v", run)
	}
	held, unknown, deleted, kept := run.Records[0], run.Records[1], run.Records[2], run.Records[3]
	if want := time.Date(2026, 12, 4, 6, 0, 0, 25e7, time.UTC); !held.Until.Equal(want) || held.Decision != DecisionHeld {
		t.Fatalf("%v, want %v", held.Until, want)
	}
	if !held.Created.Equal(time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)) || held.ResourceVersion != "7" || held.Cluster != "c" {
		t.Fatalf("%+v", held)
	}
	if !unknown.Until.IsZero() || unknown.Created != nil || !unknown.Deleting || unknown.Session != "" {
		t.Fatalf("%+v", unknown)
	}
	if !deleted.Until.Equal(time.Unix(1796364000, 0)) || deleted.Result != ResultDeleted || deleted.Archive != "file:///c" {
		t.Fatalf("%+v", deleted)
	}
	if !kept.Until.IsZero() || kept.Result != "" {
		t.Fatalf("%+v", kept)
	}
	if run.Sessions.All || len(run.Sessions.IDs) != 1 || run.Sessions.IDs[0] != "a" {
		t.Fatalf("%+v", run.Sessions)
	}
	// A UnixTime writes what it read; the zero one null.
	for _, seconds := range []string{"1796364000.25", "1796364000", "null", "-1.5"} {
		var at UnixTime
		if err := json.Unmarshal([]byte(seconds), &at); err != nil {
			t.Fatal(err)
		}
		if again, err := json.Marshal(at); err != nil || string(again) != seconds {
			t.Errorf("%s: %s %v", seconds, again, err)
		}
	}
	for _, bad := range []string{`"tomorrow"`, "1e300", "{}"} {
		var at UnixTime
		if err := json.Unmarshal([]byte(bad), &at); err == nil {
			t.Errorf("%s decoded: %v", bad, at)
		}
	}
	var lease Lease
	if err := json.Unmarshal([]byte(`{"namespace":"n","holder":"gc-cron-1","until":"2026-12-04T06:02:30Z","error":null}`), &lease); err != nil ||
		!lease.Until.Equal(time.Date(2026, 12, 4, 6, 2, 30, 0, time.UTC)) {
		t.Fatalf("%+v %v", lease, err)
	}
	if err := json.Unmarshal([]byte(`{"namespace":"n","holder":null,"until":null}`), &lease); err != nil || lease.Until != nil {
		t.Fatalf("%+v %v", lease, err)
	}
}

// The sessions a request asked for: "all", or {"ids": [...]}, both ways.
func TestRequestedSessions(t *testing.T) {
	for text, want := range map[string]Requested{
		`"all"`:             {All: true},
		`{"ids":["a","b"]}`: {IDs: []string{"a", "b"}},
		`{"ids":[]}`:        {IDs: []string{}},
	} {
		var got Requested
		if err := json.Unmarshal([]byte(text), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v %v", text, got, err)
		}
		if again, err := json.Marshal(got); err != nil || string(again) != text {
			t.Errorf("%s: %s %v", text, again, err)
		}
	}
	for _, bad := range []string{`"some"`, `7`, `["a"]`} {
		var got Requested
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s decoded: %+v", bad, got)
		}
	}
}

// The results say what they are.
func TestResults(t *testing.T) {
	for result, want := range map[Result][3]bool{
		ResultDeleted: {}, ResultWouldDelete: {}, ResultCreated: {}, ResultWouldCreate: {}, ResultExists: {},
		"failed: the API server said 500":        {true, false, false},
		"not started: the collector is stopping": {false, true, false},
		"changed: skipped, re-checked next run":  {false, false, true},
	} {
		if got := [3]bool{result.Failed(), result.NotStarted(), result.Changed()}; got != want {
			t.Errorf("%s: %v", result, got)
		}
	}
}

// Retry-After is seconds or an HTTP date.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	for header, want := range map[string]time.Duration{
		"30": 30 * time.Second, " 5 ": 5 * time.Second, "": 0, "soon": 0, "-3": 0,
		"Fri, 04 Dec 2026 06:01:00 GMT": time.Minute, "Fri, 04 Dec 2026 05:00:00 GMT": 0,
	} {
		if got := retryAfter(header, now); got != want {
			t.Errorf("%q: %s, want %s", header, got, want)
		}
	}
}

// Each path segment is sent as given, escaped: `..` is not cleaned into another call, and a
// base URL's path is kept.
func TestPathsAreEscapedNotCleaned(t *testing.T) {
	seen := make(chan string, 3)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.EscapedPath()
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"bad","field":"namespace"}`))
	}))
	defer server.Close()
	c, _ := New(server.URL+"/gc/", WithToken("t"))
	ctx := context.Background()
	c.CollectSessions(ctx, "..", []string{"a"})
	c.Restore(ctx, "streamspace", "a/b", RestoreOptions{})
	c.Run(ctx, "../status")
	for _, want := range []string{
		"/gc/v1/namespaces/../sessions/collect", "/gc/v1/namespaces/streamspace/sessions/a%2Fb/restore", "/gc/v1/runs/..%2Fstatus",
	} {
		if got := <-seen; got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}

// The package documentation's example compiles, as a function returning an error.
func TestThePackageDocumentationCompiles(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			t.Skip("no go command to build with")
		}
	}
	file, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var snippet []string
	for _, line := range strings.Split(file.Doc.Text(), "\n") {
		if strings.HasPrefix(line, "\t") {
			snippet = append(snippet, line)
		}
	}
	if len(snippet) < 10 {
		t.Fatalf("no example in the package documentation: %q", snippet)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	module := "module example.com/caller\n\ngo 1.22\n\nrequire gc.stream.space/client v0.0.0\n\nreplace gc.stream.space/client => " + here + "\n"
	program := `package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	gc "gc.stream.space/client"
)

var _, _, _, _ = errors.Is, fmt.Errorf, log.Printf, time.Second

func collect(ctx context.Context, sessionID string) error {
` + strings.Join(snippet, "\n") + `
}

func main() {
	if err := collect(context.Background(), "alice-firefox-0000000b"); err != nil {
		log.Fatal(err)
	}
}
`
	for name, text := range map[string]string{"go.mod": module, "main.go": program} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command(goTool, "vet", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, program)
	}
}

// A redirect is never followed: the bearer token goes to the API's URL only, and the call ends
// with the redirect's status as an error.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var leaked atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization") != "")
	}))
	defer elsewhere.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	c, err := New(api.URL, WithToken("secret"))
	if err != nil {
		t.Fatal(err)
	}
	status, err := c.Status(context.Background())
	if status != nil || err == nil {
		t.Fatalf("a redirect answered %v, %v", status, err)
	}
	if leaked.Load() {
		t.Fatal("the token was sent to the redirect's target")
	}
}
