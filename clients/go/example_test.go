package gc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	gc "gc.stream.space/client"
)

// Each example calls a stand-in for gc's request API on a loopback port (fakeGC), which
// answers as `gc-cli serve --api-listen` does; in a cluster the URL is gc's Service, over
// https://, as in New's example.

func ExampleNew() {
	api := fakeGC()
	defer api.Close()

	// In StreamSpace's API Pod: gc's Service over https://, the token projected for gc's
	// audience (read again whenever the kubelet rotates it), and the CA that signed gc's
	// certificate:
	//
	//	c, err := gc.New("https://gc-sessions.streamspace.svc:9443",
	//		gc.WithTokenFile("/var/run/secrets/gc/token"),
	//		gc.WithCABundle("/var/run/secrets/gc/ca.crt"))
	c, err := gc.New(api.URL, gc.WithToken("a-projected-token"), gc.WithTimeout(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	status, err := c.Status(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("gc", status.Version, "collects", status.Namespaces)

	// Plain http:// is only for a loopback address: elsewhere the token would travel in clear.
	_, err = gc.New("http://gc-sessions.streamspace.svc:9443", gc.WithToken("a-projected-token"))
	fmt.Println(err)
	// Output:
	// gc 0.9.0 collects [streamspace]
	// gc: base URL "http://gc-sessions.streamspace.svc:9443": http:// is only for a loopback host (127.0.0.0/8, ::1, localhost): to gc-sessions.streamspace.svc the bearer token would travel in clear; use https://
}

func ExampleClient_CollectSessions() {
	api := fakeGC()
	defer api.Close()
	c, err := gc.New(api.URL, gc.WithToken("a-projected-token"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// The control plane has just ended the session (its row is terminated): ask gc to collect
	// it now, and follow the run until it ends.
	run, err := c.CollectSessions(ctx, "streamspace", []string{"alice-firefox-0000000b"})
	for err == nil && !run.Done() {
		time.Sleep(time.Second)
		run, err = c.Run(ctx, run.ID)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("run", run.ID, run.State, "in", run.EndedAt.Sub(run.RequestedAt))
	for _, r := range run.Records {
		fmt.Println(r.Decision, r.Kind, r.Name+":", r.Result, "("+r.Reason+")")
	}
	// Output:
	// run 19ad7c3f1e2a0-1 succeeded in 3s
	// delete PersistentVolumeClaim alice-firefox-0000000b-home: deleted (session alice-firefox-0000000b: row terminated)
	// delete Session alice-firefox-0000000b: deleted (session alice-firefox-0000000b: row terminated)
}

func ExampleClient_Run() {
	api := fakeGC()
	defer api.Close()
	c, err := gc.New(api.URL, gc.WithToken("a-projected-token"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Runs asked for earlier (their ids kept from the collections' answers), as they are now.
	for _, id := range []string{"19ad7c3f1e2a0-1", "19ad7c3f1e2a0-9"} {
		run, err := c.Run(ctx, id)
		switch {
		case errors.Is(err, gc.ErrNotFound):
			// Requests are kept in memory: gc restarted, or the run is long past. Ask again.
			fmt.Println(id, "unknown: collect again")
			continue
		case err != nil:
			log.Fatal(err)
		}
		switch run.State {
		case gc.RunSucceeded:
			deleted, failed := 0, 0
			for _, r := range run.Records {
				switch {
				case r.Result == gc.ResultDeleted:
					deleted++
				case r.Result.Failed():
					failed++
				}
			}
			fmt.Println(id, "succeeded:", deleted, "deleted,", failed, "failed")
		case gc.RunFailed, gc.RunStopped:
			fmt.Println(id, run.State, *run.Error)
		default: // gc.RunQueued, gc.RunRunning
			fmt.Println(id, run.State, "since", run.RequestedAt.Format(time.RFC3339))
		}
	}
	// Output:
	// 19ad7c3f1e2a0-1 succeeded: 2 deleted, 0 failed
	// 19ad7c3f1e2a0-9 unknown: collect again
}

func ExampleClient_PlanSessions() {
	api := fakeGC()
	defer api.Close()
	c, err := gc.New(api.URL, gc.WithToken("a-projected-token"))
	if err != nil {
		log.Fatal(err)
	}

	// What a collection of the session would do now; nothing is written.
	plan, err := c.PlanSessions(context.Background(), "streamspace", []string{"bob-firefox-0000000c"})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range plan.Judged {
		switch {
		case j.Decision == gc.DecisionHeld && !j.Until.IsZero():
			fmt.Println("held", j.Kind, j.Name, "until", j.Until.Format(time.RFC3339))
		case j.Decision == gc.DecisionHeld:
			fmt.Println("held", j.Kind, j.Name, "until its creation time is known")
		default:
			fmt.Println(j.Decision, j.Kind, j.Name)
		}
	}
	fmt.Println(plan.Scanned, "scanned,", plan.Orphans, "orphans; rows in a state gc does not know:", plan.UnknownStates)
	// Output:
	// held Deployment bob-firefox-0000000c until 2026-12-04T06:03:00Z
	// held Service bob-firefox-0000000c until 2026-12-04T06:03:01Z
	// unrequested Service carol-firefox-0000000d
	// 3 scanned, 3 orphans; rows in a state gc does not know: map[paused:1]
}

func ExampleClient_Restore() {
	api := fakeGC()
	defer api.Close()
	// A restore waits up to BindWait for a claim on its kept volume to be bound: a timeout above.
	c, err := gc.New(api.URL, gc.WithToken("a-projected-token"), gc.WithTimeout(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// The session's row is back in a live state (else the next collection takes it again):
	// what gc archived of it, then its objects created again from their verified archives.
	archives, err := c.Archives(ctx, "streamspace", "alice-firefox-0000000b")
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range archives.Archives {
		fmt.Println("archived", a.Kind, a.Name, "at", a.RunAt.Format(time.RFC3339), a.Bytes, "bytes")
	}
	restored, err := c.Restore(ctx, "streamspace", "alice-firefox-0000000b", gc.RestoreOptions{BindWait: 10 * time.Second})
	if err != nil {
		// ErrNotOffered: this gc has no restore account; ErrNotFound: no archive of the
		// session; ErrBusy: another restore of it is in progress.
		log.Fatal(err)
	}
	fmt.Println("restored as", restored.RestoredAs)
	for _, o := range restored.Objects {
		switch {
		case o.Result == gc.ResultCreated && o.Note != nil:
			fmt.Println(o.Result, o.Kind, o.Name+":", *o.Note)
		case o.Result == gc.ResultCreated, o.Result == gc.ResultExists:
			fmt.Println(o.Result, o.Kind, o.Name)
		case o.Result.Failed():
			fmt.Println("not restored:", o.Kind, o.Name, o.Result)
		}
	}
	// Output:
	// archived Session alice-firefox-0000000b at 2026-12-04T06:00:00Z 1873 bytes
	// archived PersistentVolumeClaim alice-firefox-0000000b-home at 2026-12-04T06:00:00Z 1204 bytes
	// restored as system:serviceaccount:gc:gc-restore
	// created PersistentVolumeClaim alice-firefox-0000000b-home: on its kept volume pvc-5e8d1f2a-7c4b-4a9e-8f3d-6b2c0a1e9d57, bound: reclaim policy Delete given back
	// created Session alice-firefox-0000000b
}

// A collection refused because another process's run (the CronJob's) holds the namespace:
// nothing was done, and the refusal says when to ask again.
func ExampleAPIError() {
	api := fakeBusyGC()
	defer api.Close()
	c, err := gc.New(api.URL, gc.WithToken("a-projected-token"))
	if err != nil {
		log.Fatal(err)
	}

	run, err := c.CollectSessions(context.Background(), "streamspace", []string{"alice-firefox-0000000b"})
	var refusal *gc.APIError
	switch {
	case errors.Is(err, gc.ErrBusy), errors.Is(err, gc.ErrQueueFull), errors.Is(err, gc.ErrUnavailable):
		// Not now: ask again after Retry-After (or leave the session to the next scheduled run).
		errors.As(err, &refusal)
		fmt.Println(refusal.StatusCode, refusal.Message)
		fmt.Println("ask again in", refusal.RetryAfter)
	case errors.As(err, &refusal):
		// Refused for good (ErrForbidden; ErrBadRequest naming refusal.Field; ...).
		log.Fatal(refusal)
	case err != nil:
		log.Fatal(err) // no answer: the network, the context, the token file
	default:
		fmt.Println("run", run.ID, run.State)
	}
	// Output:
	// 409 namespace streamspace: another process holds its Lease (gc-sessions-29412360-x7k2p) until 2026-12-04T06:02:30Z: nothing was done
	// ask again in 30s
}
