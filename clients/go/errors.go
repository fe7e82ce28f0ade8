package gc

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors a call may end with, to test with errors.Is; the *APIError says more. Each refusal
// changed nothing.
var (
	// ErrBadRequest (400): the input is wrong; APIError.Field names the field (`sessions[1]`,
	// `namespace`, ...). Fix the call; asking again as it is fails again.
	ErrBadRequest = errors.New("gc: bad request")
	// ErrUnauthorized (401): no token, or one the API server does not accept for gc's audience
	// (not projected for audience gc, expired, forged).
	ErrUnauthorized = errors.New("gc: not authenticated")
	// ErrForbidden (403): the caller's account may not make this call in this namespace: bind
	// it to the chart's caller (or restorer) ClusterRole there.
	ErrForbidden = errors.New("gc: not allowed")
	// ErrNotFound (404): no such run in the process that answered (requests are kept in
	// memory; gc restarted, or the run is long past), or no archive of the session to restore.
	ErrNotFound = errors.New("gc: not found")
	// ErrBusy (409): another process's run holds the namespace (the CronJob, another replica),
	// or another restore of the session is in progress. Ask again after APIError.RetryAfter.
	ErrBusy = errors.New("gc: namespace busy")
	// ErrRefused (422): the plan is refused (the mass-deletion guard, no answer for an id from
	// the database). Nothing to retry: an operator looks at why.
	ErrRefused = errors.New("gc: refused by the guard")
	// ErrQueueFull (429): too many requests already wait in the namespace, or too many tokens to
	// review came from the caller's address. Ask again after APIError.RetryAfter.
	ErrQueueFull = errors.New("gc: queue full")
	// ErrUnavailable (503): the API server could not say who the caller is or what it may do,
	// gc could not act as its restore account, or the process is stopping. Ask again after
	// APIError.RetryAfter.
	ErrUnavailable = errors.New("gc: unavailable")
	// ErrNotOffered (501): this gc offers no restore (it has no restore account: serve it with
	// --api-restore-account, the chart's gc.restore.enabled).
	ErrNotOffered = errors.New("gc: not offered")
)

// ErrNoSession is CollectSessions' refusal of an empty list, before any call: CollectAll asks
// for every session.
var ErrNoSession = errors.New("gc: no session id given: name at least one, or call CollectAll")

// sentinels are the errors of the API's statuses.
var sentinels = map[int]error{
	http.StatusBadRequest:          ErrBadRequest,
	http.StatusUnauthorized:        ErrUnauthorized,
	http.StatusForbidden:           ErrForbidden,
	http.StatusNotFound:            ErrNotFound,
	http.StatusConflict:            ErrBusy,
	http.StatusUnprocessableEntity: ErrRefused,
	http.StatusTooManyRequests:     ErrQueueFull,
	http.StatusNotImplemented:      ErrNotOffered,
	http.StatusServiceUnavailable:  ErrUnavailable,
}

// APIError is a refusal of the API: nothing was changed.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int `json:"-"`
	// Message is what was wrong, and what to do.
	Message string `json:"error"`
	// Field is the request field at fault, for a bad request.
	Field string `json:"field,omitempty"`
	// RetryAfter is how long to wait before asking again, when the server says (ErrBusy,
	// ErrQueueFull, ErrUnavailable); zero otherwise.
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("gc: %d: %s: %s", e.StatusCode, e.Field, e.Message)
	}
	return fmt.Sprintf("gc: %d: %s", e.StatusCode, e.Message)
}

// Is matches the sentinel of the error's status (ErrBusy for 409, ...).
func (e *APIError) Is(target error) bool {
	sentinel := sentinels[e.StatusCode]
	return sentinel != nil && target == sentinel
}

// retryAfter is a Retry-After header's wait: seconds, or an HTTP date; zero without one.
func retryAfter(header string, now time.Time) time.Duration {
	header = strings.TrimSpace(header)
	if header == "" {
		return 0
	}
	if seconds, err := strconv.Atoi(header); err == nil {
		return max(time.Duration(seconds)*time.Second, 0)
	}
	if at, err := http.ParseTime(header); err == nil {
		return max(at.Sub(now), 0)
	}
	return 0
}
