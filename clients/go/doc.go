// Package gc is the Go client of gc's request API (`gc-cli serve --api-listen`): a control
// plane asks gc to plan or collect some sessions of a namespace now, follows the run, lists a
// session's archives and restores a session from them.
//
// It uses the standard library only, so it builds with CGO_ENABLED=0 on every platform. Each
// call carries the caller's ServiceAccount token, projected for gc's audience and read again
// from its file when the kubelet rotates it; gc checks it with the API server. The token is
// only sent over TLS (https://), or over plain http:// to a loopback address.
//
// The module path gc.stream.space/client is a vanity path that is not served yet: `go get`
// cannot fetch it. Require it with a replace directive pointing at a checkout of gc
// (`replace gc.stream.space/client => ../gc/clients/go`), a Go workspace or vendoring; the
// README beside this file says how.
//
// Collect a session the control plane has just ended, and follow the run until it ends (in a
// function returning an error, ctx and sessionID given):
//
//	c, err := gc.New("https://gc-sessions.streamspace.svc:9443",
//		gc.WithTokenFile("/var/run/secrets/gc/token"),
//		gc.WithCABundle("/var/run/secrets/gc/ca.crt"))
//	if err != nil {
//		return err
//	}
//	run, err := c.CollectSessions(ctx, "streamspace", []string{sessionID})
//	for err == nil && !run.Done() {
//		time.Sleep(time.Second)
//		run, err = c.Run(ctx, run.ID)
//	}
//	if errors.Is(err, gc.ErrBusy) || errors.Is(err, gc.ErrQueueFull) {
//		// Nothing was done: ask again after the refusal's RetryAfter, or leave the
//		// session to the next scheduled run.
//		return fmt.Errorf("session %s: ask again later: %w", sessionID, err)
//	}
//	if err != nil {
//		return err
//	}
//	for _, r := range run.Records {
//		log.Printf("%s %s %s: %s %s", r.Decision, r.Kind, r.Name, r.Result, r.Reason)
//	}
//	if run.State != gc.RunSucceeded {
//		return fmt.Errorf("run %s ended %s", run.ID, run.State) // run.Error says why
//	}
//	return nil
//
// On error every call returns a nil result and an error: an [*APIError] when the API refused
// (nothing was changed), to test with [errors.Is] against [ErrBadRequest], [ErrUnauthorized],
// [ErrForbidden], [ErrNotFound], [ErrBusy], [ErrRefused], [ErrQueueFull], [ErrUnavailable] or
// [ErrNotOffered]; otherwise a transport, context or decoding error.
package gc
