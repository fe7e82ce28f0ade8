// Package gc is the Go client of gc's request API (`gc-cli serve --api-listen`): a control
// plane asks gc to plan or collect some sessions of a namespace now, follows the run, lists a
// session's archives and restores a session from them.
//
// It uses the standard library only, so it builds with CGO_ENABLED=0 on every platform. Each
// call carries the caller's ServiceAccount token, projected for gc's audience and read again
// from its file when the kubelet rotates it; gc checks it with the API server.
//
//	c, err := gc.New("https://gc-sessions.streamspace:9443",
//		gc.WithTokenFile("/var/run/secrets/gc/token"), gc.WithCABundle("/etc/gc/ca.crt"))
//	run, err := c.CollectSessions(ctx, "streamspace", []string{sessionID})
//	for !run.Done() { time.Sleep(time.Second); run, err = c.Run(ctx, run.ID) }
package gc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client calls one gc request API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	http      *http.Client
	token     string
	tokenFile string

	mu       sync.Mutex
	read     string
	modified time.Time
}

// Option sets up a Client.
type Option func(*Client) error

// WithTokenFile reads the bearer token from path (a projected ServiceAccount token), again
// whenever the file changes.
func WithTokenFile(path string) Option {
	return func(c *Client) error {
		c.tokenFile = path
		_, err := c.bearer()
		return err
	}
}

// WithToken sends token as the bearer token.
func WithToken(token string) Option {
	return func(c *Client) error {
		c.token = token
		return nil
	}
}

// WithCABundle trusts the certificates of the PEM file at path (and only them) for TLS.
func WithCABundle(path string) Option {
	return func(c *Client) error {
		pem, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("gc: CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("gc: CA bundle %s: no certificate in it", path)
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		c.http.Transport = transport
		return nil
	}
}

// WithTimeout bounds each call (default 30 seconds); a context's deadline bounds it too.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		c.http.Timeout = d
		return nil
	}
}

// WithHTTPClient sends the calls with h (its transport, its timeout).
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error {
		c.http = h
		return nil
	}
}

// New is a client of the API at baseURL (`https://HOST:PORT`).
func New(baseURL string, opts ...Option) (*Client, error) {
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("gc: base URL %q: want https://HOST:PORT", baseURL)
	}
	c := &Client{base: base, http: &http.Client{Timeout: 30 * time.Second}}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// bearer is the token to send: the file's, read again when it changed.
func (c *Client) bearer() (string, error) {
	if c.tokenFile == "" {
		return c.token, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	info, err := os.Stat(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("gc: token file: %w", err)
	}
	if c.read == "" || !info.ModTime().Equal(c.modified) {
		text, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return "", fmt.Errorf("gc: token file: %w", err)
		}
		c.read, c.modified = strings.TrimSpace(string(text)), info.ModTime()
	}
	return c.read, nil
}

// Errors a call may end with, to test with errors.Is; the *APIError says more.
var (
	ErrBadRequest   = errors.New("gc: bad request")          // 400: the field is named
	ErrUnauthorized = errors.New("gc: not authenticated")    // 401: no token, or not for gc
	ErrForbidden    = errors.New("gc: not allowed")          // 403: the caller may not
	ErrNotFound     = errors.New("gc: not found")            // 404: no such run
	ErrBusy         = errors.New("gc: namespace busy")       // 409: another process's run
	ErrRefused      = errors.New("gc: refused by the guard") // 422: a plan the guard refuses
	ErrQueueFull    = errors.New("gc: queue full")           // 429: try again later
	ErrUnavailable  = errors.New("gc: unavailable")          // 503: try again later
	ErrNotOffered   = errors.New("gc: not offered")          // 501: restore is not set up
)

// APIError is a refusal of the API: nothing was changed.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int `json:"-"`
	// Message is what was wrong, and what to do.
	Message string `json:"error"`
	// Field is the request field at fault, for a bad request.
	Field string `json:"field,omitempty"`
	// RetryAfter is when to try again, when the server says.
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("gc: %d: %s: %s", e.StatusCode, e.Field, e.Message)
	}
	return fmt.Sprintf("gc: %d: %s", e.StatusCode, e.Message)
}

// Is matches the sentinel of the error's status.
func (e *APIError) Is(target error) bool {
	sentinel := map[int]error{
		400: ErrBadRequest, 401: ErrUnauthorized, 403: ErrForbidden, 404: ErrNotFound,
		409: ErrBusy, 422: ErrRefused, 429: ErrQueueFull, 501: ErrNotOffered, 503: ErrUnavailable,
	}[e.StatusCode]
	return sentinel != nil && target == sentinel
}

// call sends method path with body (JSON, or none) and decodes the answer into out.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	var reader io.Reader
	if body != nil {
		text, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(text)
	}
	path, query, _ := strings.Cut(path, "?")
	target := c.base.JoinPath(path)
	target.RawQuery = query
	request, err := http.NewRequestWithContext(ctx, method, target.String(), reader)
	if err != nil {
		return err
	}
	request.Header.Set("Accept", "application/json")
	if body != nil {
		request.Header.Set("Content-Type", "application/json")
	}
	token, err := c.bearer()
	if err != nil {
		return err
	}
	if token != "" {
		request.Header.Set("Authorization", "Bearer "+token)
	}
	response, err := c.http.Do(request)
	if err != nil {
		return fmt.Errorf("gc: %s %s: %w", method, path, err)
	}
	defer response.Body.Close()
	text, err := io.ReadAll(io.LimitReader(response.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("gc: %s %s: %w", method, path, err)
	}
	if response.StatusCode >= 300 {
		refusal := &APIError{StatusCode: response.StatusCode}
		if json.Unmarshal(text, refusal) != nil || refusal.Message == "" {
			refusal.Message = strings.TrimSpace(string(text))
		}
		if seconds, err := strconv.Atoi(response.Header.Get("Retry-After")); err == nil {
			refusal.RetryAfter = time.Duration(seconds) * time.Second
		}
		return refusal
	}
	if err := json.Unmarshal(text, out); err != nil {
		return fmt.Errorf("gc: %s %s: the answer is not what was expected: %w", method, path, err)
	}
	return nil
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
	// Until is when the hold ends unless renewed (RFC 3339).
	Until *string `json:"until"`
	Error *string `json:"error"`
}

// Lane is a namespace's requests.
type Lane struct {
	Namespace string `json:"namespace"`
	// Queued counts the requests waiting for the namespace's next run.
	Queued int `json:"queued"`
	// Last is the latest request, nil before the first.
	Last *Run `json:"last"`
}

// Judged is one resource as a plan or a run judged it.
type Judged struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	// Session is the session id of its label (empty: none).
	Session string `json:"session"`
	// Decision is delete, held, kept, skipped or deferred.
	Decision string `json:"decision"`
	// Reason says why.
	Reason string `json:"reason"`
}

// Plan is what a collection would do now.
type Plan struct {
	// Judged is every resource scanned, with its decision.
	Judged []Judged `json:"judged"`
	// Scanned and Orphans count resources.
	Scanned int `json:"scanned"`
	Orphans int `json:"orphans"`
}

// Record is one audit record of a run: a resource, its decision, and what its delete did.
type Record struct {
	Judged
	// Result is what the delete did (`deleted`, `would delete`, ...); empty: no delete.
	Result string `json:"result"`
	// Archive is where the resource was archived before its delete.
	Archive string `json:"archive"`
	// DryRun says whether the run was a dry run.
	DryRun bool `json:"dryRun"`
}

// Run is a requested collection, as `GET /v1/runs/{id}` shows it.
type Run struct {
	ID          string `json:"id"`
	Namespace   string `json:"namespace"`
	RequestedBy string `json:"requestedBy"`
	// State is queued, running, succeeded, failed or stopped.
	State       string  `json:"state"`
	RequestedAt string  `json:"requestedAt"`
	EndedAt     *string `json:"endedAt"`
	// Error says why it failed or stopped.
	Error *string `json:"error"`
	// Records are the audit records of the sessions it asked for.
	Records []Record `json:"records"`
}

// Done reports whether nothing more happens to the run.
func (r *Run) Done() bool {
	return r.State == "succeeded" || r.State == "failed" || r.State == "stopped"
}

type asking struct {
	Sessions []string `json:"sessions,omitempty"`
}

// Status is the API's version and namespaces.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	return &out, c.call(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// PlanSessions is what a collection of sessions (none: all) of namespace would do now.
func (c *Client) PlanSessions(ctx context.Context, namespace string, sessions []string) (*Plan, error) {
	var out Plan
	path := "/v1/namespaces/" + url.PathEscape(namespace) + "/sessions/plan"
	return &out, c.call(ctx, http.MethodPost, path, asking{sessions}, &out)
}

// ErrNoSession is CollectSessions' refusal of an empty list: CollectAll asks for every session.
var ErrNoSession = errors.New("gc: no session id given: name at least one, or call CollectAll")

// CollectSessions asks for a collection of sessions (at least one) of namespace: the run,
// ended when the server answered within its wait, else queued or running (follow it with Run).
// Each id is still judged against the database with the operator's settings.
func (c *Client) CollectSessions(ctx context.Context, namespace string, sessions []string) (*Run, error) {
	if len(sessions) == 0 {
		return nil, ErrNoSession
	}
	return c.collect(ctx, namespace, asking{sessions})
}

// CollectAll asks for a collection of every session of namespace, as a scheduled run.
func (c *Client) CollectAll(ctx context.Context, namespace string) (*Run, error) {
	return c.collect(ctx, namespace, asking{})
}

func (c *Client) collect(ctx context.Context, namespace string, body asking) (*Run, error) {
	var out Run
	path := "/v1/namespaces/" + url.PathEscape(namespace) + "/sessions/collect"
	return &out, c.call(ctx, http.MethodPost, path, body, &out)
}

// Run is the requested collection id, as it is now.
func (c *Client) Run(ctx context.Context, id string) (*Run, error) {
	var out Run
	return &out, c.call(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &out)
}

// Restored is what came of one archived object of a restored session.
type Restored struct {
	Session     string `json:"session"`
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	ArchivedUID string `json:"archivedUid"`
	// UID is the new object's (nil: none was created).
	UID *string `json:"uid"`
	// Result is `created`, `would create` (a dry run), `exists` (left as it is) or `failed: ...`.
	Result string `json:"result"`
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

// RestoreOptions narrow a restore.
type RestoreOptions struct {
	// DryRun sends every create as a server-side dry run and moves no volume.
	DryRun bool
	// BindWait is how long to wait (at most a minute) for a claim created on its kept volume
	// to be bound, to give the volume back its policy; zero: the next run does.
	BindWait time.Duration
}

type restoring struct {
	DryRun          bool  `json:"dryRun"`
	BindWaitSeconds int64 `json:"bindWaitSeconds"`
}

// Restore creates the archived objects of session in namespace again (those that do not
// exist now), each from its verified archive, as gc's restore account; a session whose
// archives fail verification restores nothing. ErrNotOffered when the server has no restore
// account, ErrNotFound for a session with no archive, ErrBusy while another restore of it
// runs. The call waits for the restore, up to opts.BindWait for each kept claim: give the client
// a timeout above that (WithTimeout; 30 seconds by default). A restore cut short by the client
// still runs to its end on the server, and is in gc's audit log.
func (c *Client) Restore(ctx context.Context, namespace, session string, opts RestoreOptions) (*Restoration, error) {
	var out Restoration
	path := "/v1/namespaces/" + url.PathEscape(namespace) + "/sessions/" + url.PathEscape(session) + "/restore"
	body := restoring{DryRun: opts.DryRun, BindWaitSeconds: int64(opts.BindWait / time.Second)}
	return &out, c.call(ctx, http.MethodPost, path, body, &out)
}

// Archive is the receipt of one archived object: where its manifest is and what verifies it.
type Archive struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	// RunAt is the instant of the run that archived it (RFC 3339).
	RunAt  string `json:"runAt"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	// RetainedVolume is a deleted claim's volume gc kept (nil: none), VolumePolicy its policy before.
	RetainedVolume *string `json:"retainedVolume"`
	VolumePolicy   *string `json:"volumePolicy"`
}

// Archives are a session's receipts, newest first.
type Archives struct {
	Session  string    `json:"session"`
	Archives []Archive `json:"archives"`
}

// Archives lists the receipts of the archived objects of session in namespace.
func (c *Client) Archives(ctx context.Context, namespace, session string) (*Archives, error) {
	var out Archives
	path := "/v1/namespaces/" + url.PathEscape(namespace) + "/archives?" + url.Values{"session": {session}}.Encode()
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}
