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
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds each call of a Client made without WithTimeout or WithHTTPClient.
const DefaultTimeout = 30 * time.Second

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

// settings are what the options ask for; New makes the client of them, whatever their order.
type settings struct {
	token     string
	tokenFile string
	http      *http.Client
	timeout   *time.Duration
	roots     *x509.CertPool
}

// Option sets up a Client (With...); New applies them, in any order.
type Option struct {
	apply func(*settings) error
}

// WithTokenFile reads the bearer token from path (a projected ServiceAccount token), again
// whenever the file changes. New fails when it cannot be read. It replaces WithToken.
func WithTokenFile(path string) Option {
	return Option{func(s *settings) error {
		s.tokenFile, s.token = path, ""
		return nil
	}}
}

// WithToken sends token as the bearer token. It replaces WithTokenFile.
func WithToken(token string) Option {
	return Option{func(s *settings) error {
		s.token, s.tokenFile = token, ""
		return nil
	}}
}

// WithCABundle trusts the certificates of the PEM file at path (and only them) for TLS. The
// client's transport is a copy (of the one WithHTTPClient gave, which must then be an
// *http.Transport or nil, or of http.DefaultTransport) with these roots: no transport of the
// caller's is changed.
func WithCABundle(path string) Option {
	return Option{func(s *settings) error {
		pem, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("gc: CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("gc: CA bundle %s: no certificate in it", path)
		}
		s.roots = pool
		return nil
	}}
}

// WithTimeout bounds each call (DefaultTimeout without it); a context's deadline bounds it
// too. It sets the timeout of the client's own copy of any *http.Client WithHTTPClient gave.
func WithTimeout(d time.Duration) Option {
	return Option{func(s *settings) error {
		if d < 0 {
			return fmt.Errorf("gc: timeout %s: want zero (none) or more", d)
		}
		s.timeout = &d
		return nil
	}}
}

// WithHTTPClient sends the calls with a copy of h: its transport, its timeout, its cookie jar
// and redirect policy. h is never changed, nor its transport (WithCABundle and WithTimeout
// change the copy).
func WithHTTPClient(h *http.Client) Option {
	return Option{func(s *settings) error {
		if h == nil {
			return errors.New("gc: WithHTTPClient(nil)")
		}
		copied := *h
		s.http = &copied
		return nil
	}}
}

// New is a client of the API at baseURL, `https://HOST:PORT`. Plain `http://` is refused
// except to a loopback host (127.0.0.0/8, ::1, localhost): the bearer token would travel in
// clear.
func New(baseURL string, opts ...Option) (*Client, error) {
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("gc: base URL %q: want https://HOST:PORT", baseURL)
	}
	if base.Scheme == "http" && !loopback(base.Hostname()) {
		return nil, fmt.Errorf("gc: base URL %q: http:// is only for a loopback host "+
			"(127.0.0.0/8, ::1, localhost): to %s the bearer token would travel in clear; use https://",
			baseURL, base.Hostname())
	}
	var s settings
	for _, opt := range opts {
		if opt.apply == nil {
			continue
		}
		if err := opt.apply(&s); err != nil {
			return nil, err
		}
	}
	h := s.http
	if h == nil {
		h = &http.Client{Timeout: DefaultTimeout}
	}
	if s.timeout != nil {
		h.Timeout = *s.timeout
	}
	// The API never redirects: a redirect is answered as it is, never followed with the token
	// (to another host, or to http://).
	h.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if s.roots != nil {
		transport, err := trusting(h.Transport, s.roots)
		if err != nil {
			return nil, err
		}
		h.Transport = transport
	}
	c := &Client{base: base, http: h, token: s.token, tokenFile: s.tokenFile}
	if c.tokenFile != "" {
		if _, err := c.bearer(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// trusting is a copy of transport (nil: http.DefaultTransport) that trusts roots only.
func trusting(transport http.RoundTripper, roots *x509.CertPool) (*http.Transport, error) {
	if transport == nil {
		transport = http.DefaultTransport
	}
	t, ok := transport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("gc: WithCABundle: the HTTP client's transport is a %T, not an "+
			"*http.Transport: give it the CA bundle's roots itself, without WithCABundle", transport)
	}
	t = t.Clone() // its TLS configuration cloned too
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.RootCAs = roots
	t.TLSClientConfig.MinVersion = max(t.TLSClientConfig.MinVersion, tls.VersionTLS12)
	return t, nil
}

// loopback says whether host is a loopback address or localhost.
func loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// do sends method path (with a query, or none) with body (JSON, or none) and decodes the
// answer: a new T, or nil and the error.
func do[T any](ctx context.Context, c *Client, method, path string, body any) (*T, error) {
	var out T
	if err := c.call(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
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
	// The escaped path after the base's, as it is: a segment `..` is sent, not cleaned away.
	escaped := strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		return err
	}
	target := *c.base
	target.Path, target.RawPath = unescaped, escaped
	target.RawQuery, target.Fragment, target.RawFragment = query, "", ""
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
		refusal.RetryAfter = retryAfter(response.Header.Get("Retry-After"), time.Now())
		return refusal
	}
	if err := json.Unmarshal(text, out); err != nil {
		return fmt.Errorf("gc: %s %s: the answer is not what was expected: %w", method, path, err)
	}
	return nil
}

// asking is the body of a plan or a collection.
type asking struct {
	Sessions []string `json:"sessions,omitempty"`
}

// restoring is the body of a restore.
type restoring struct {
	DryRun          bool  `json:"dryRun"`
	BindWaitSeconds int64 `json:"bindWaitSeconds"`
}

// sessionsPath is the path of a namespace's sessions' call.
func sessionsPath(namespace, call string) string {
	return "/v1/namespaces/" + url.PathEscape(namespace) + "/sessions/" + call
}

// Status is gc's version, the namespaces it collects, each one's queue and latest request, and
// who holds each one's run lock. It needs `get status` cluster-wide.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return do[Status](ctx, c, http.MethodGet, "/v1/status", nil)
}

// PlanSessions is what a collection of sessions (none: all) of namespace would do now: every
// resource judged, nothing written. ErrRefused when the mass-deletion guard refuses the plan.
func (c *Client) PlanSessions(ctx context.Context, namespace string, sessions []string) (*Plan, error) {
	return do[Plan](ctx, c, http.MethodPost, sessionsPath(namespace, "plan"), asking{sessions})
}

// CollectSessions asks for a collection of sessions (at least one, else ErrNoSession) of
// namespace: the run, ended when the server answered within its wait (ten seconds), else
// queued or running: follow it with Run until Done. Each id is still judged against the
// database with the operator's settings; nothing is deleted on the caller's word alone.
// ErrBusy while another process's run holds the namespace, ErrQueueFull when too many
// requests wait there: ask again after the APIError's RetryAfter.
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
	return do[Run](ctx, c, http.MethodPost, sessionsPath(namespace, "collect"), body)
}

// Run is the requested collection id (Run.ID of a collection's answer), as it is now.
// ErrNotFound when the process that answers does not know it (gc restarted: ask again).
func (c *Client) Run(ctx context.Context, id string) (*Run, error) {
	return do[Run](ctx, c, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil)
}

// RestoreOptions narrow a restore.
type RestoreOptions struct {
	// DryRun sends every create as a server-side dry run and moves no volume.
	DryRun bool
	// BindWait is how long to wait (at most a minute) for a claim created on its kept volume
	// to be bound, to give the volume back its policy; zero: the next run does.
	BindWait time.Duration
}

// Restore creates the archived objects of session in namespace again (those that do not
// exist now), each from its verified archive, as gc's restore account; a session whose
// archives fail verification restores nothing. ErrNotOffered when the server has no restore
// account, ErrNotFound for a session with no archive, ErrBusy while another restore of it
// runs. The call waits for the restore, up to opts.BindWait for each kept claim: give the client
// a timeout above that (WithTimeout; DefaultTimeout otherwise). A restore cut short by the
// client still runs to its end on the server, and is in gc's audit log.
func (c *Client) Restore(ctx context.Context, namespace, session string, opts RestoreOptions) (*Restoration, error) {
	body := restoring{DryRun: opts.DryRun, BindWaitSeconds: int64(opts.BindWait / time.Second)}
	return do[Restoration](ctx, c, http.MethodPost, sessionsPath(namespace, url.PathEscape(session)+"/restore"), body)
}

// Archives lists the receipts of the archived objects of session in namespace, newest first.
func (c *Client) Archives(ctx context.Context, namespace, session string) (*Archives, error) {
	path := "/v1/namespaces/" + url.PathEscape(namespace) + "/archives?" + url.Values{"session": {session}}.Encode()
	return do[Archives](ctx, c, http.MethodGet, path, nil)
}
