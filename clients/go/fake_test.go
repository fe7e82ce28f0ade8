package gc_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gc "gc.stream.space/client"
)

// answer is what the stand-in for gc's API answers a call.
type answer struct {
	status     int
	retryAfter string
	body       string
}

// The answers of gc's request API to the examples' calls, each as openapi.json describes it
// (TestTheStandInAnswersAsTheDocumentSays checks them): StreamSpace's session
// alice-firefox-0000000b ended, collected by run 19ad7c3f1e2a0-1, and restored.
var answers = map[string]answer{
	"GET /v1/status": {200, "", `{"version":"0.9.0","namespaces":["streamspace"],
		"requests":[{"namespace":"streamspace","queued":0,"last":` + strings.Replace(ran, `"records":[`+records+`]`, `"records":[]`, 1) + `}],
		"leases":[{"namespace":"streamspace","holder":null,"until":null,"error":null}]}`},
	"POST /v1/namespaces/streamspace/sessions/collect": {202, "", running},
	"GET /v1/runs/19ad7c3f1e2a0-1":                     {200, "", ran},
	"POST /v1/namespaces/streamspace/sessions/plan": {200, "", `{"judged":[
		{"apiVersion":"apps/v1","kind":"Deployment","name":"bob-firefox-0000000c","uid":"6c1e0b52-8d0e-4d53-9f55-0f3a1c2b7e11",
		 "resourceVersion":"48213","created":"2026-12-04T05:58:00Z","deleting":false,"session":"bob-firefox-0000000c",
		 "decision":"held","reason":"session bob-firefox-0000000c is terminated; within the grace period","until":1796364180.0},
		{"apiVersion":"v1","kind":"Service","name":"bob-firefox-0000000c","uid":"0a4f2d8e-5b7c-4e1a-8c3d-2f6b9e0a1d44",
		 "resourceVersion":"48217","created":"2026-12-04T05:58:01Z","deleting":false,"session":"bob-firefox-0000000c",
		 "decision":"held","reason":"session bob-firefox-0000000c is terminated; within the grace period","until":1796364181.0},
		{"apiVersion":"v1","kind":"Service","name":"carol-firefox-0000000d","uid":"3d9a7e21-6f0c-4b8d-a2e5-9c1f4b7d0e63",
		 "resourceVersion":"47310","created":"2026-12-04T01:12:44Z","deleting":false,"session":"carol-firefox-0000000d",
		 "decision":"unrequested","reason":"session carol-firefox-0000000d is terminated; not requested: left for a scheduled run"}],
		"scanned":3,"orphans":3,"spared":0,"unknownStates":{"paused":1},"missingKinds":[],"lookups":1}`},
	"GET /v1/namespaces/streamspace/archives?session=alice-firefox-0000000b": {200, "", `{"session":"alice-firefox-0000000b","archives":[
		{"apiVersion":"stream.space/v1alpha1","kind":"Session","name":"alice-firefox-0000000b","uid":"d2b7a0c4-3e51-4f8a-9b6d-1c0e7f2a5b39",
		 "runAt":"2026-12-04T06:00:00Z","uri":"s3://gc-archives/prod-eu/streamspace/alice-firefox-0000000b/Session.json",
		 "sha256":"9f2c4e7a1b3d5f6081a2c4e6f8091b2d3c4e5f60718293a4b5c6d7e8f9012345","bytes":1873,"retainedVolume":null,"volumePolicy":null},
		{"apiVersion":"v1","kind":"PersistentVolumeClaim","name":"alice-firefox-0000000b-home","uid":"5e8d1f2a-7c4b-4a9e-8f3d-6b2c0a1e9d57",
		 "runAt":"2026-12-04T06:00:00Z","uri":"s3://gc-archives/prod-eu/streamspace/alice-firefox-0000000b/PersistentVolumeClaim.json",
		 "sha256":"1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809","bytes":1204,
		 "retainedVolume":"pvc-5e8d1f2a-7c4b-4a9e-8f3d-6b2c0a1e9d57","volumePolicy":"Delete"}]}`},
	"POST /v1/namespaces/streamspace/sessions/alice-firefox-0000000b/restore": {200, "", `{"session":"alice-firefox-0000000b",
		"dryRun":false,"requestedBy":"system:serviceaccount:streamspace:streamspace-api",
		"restoredAs":"system:serviceaccount:gc:gc-restore","failed":0,"objects":[
		{"session":"alice-firefox-0000000b","apiVersion":"v1","kind":"PersistentVolumeClaim","name":"alice-firefox-0000000b-home",
		 "archivedUid":"5e8d1f2a-7c4b-4a9e-8f3d-6b2c0a1e9d57","uid":"7b3e9c1d-2a4f-4e8b-9d6c-0f1a2b3c4d5e","result":"created",
		 "note":"on its kept volume pvc-5e8d1f2a-7c4b-4a9e-8f3d-6b2c0a1e9d57, bound: reclaim policy Delete given back"},
		{"session":"alice-firefox-0000000b","apiVersion":"stream.space/v1alpha1","kind":"Session","name":"alice-firefox-0000000b",
		 "archivedUid":"d2b7a0c4-3e51-4f8a-9b6d-1c0e7f2a5b39","uid":"e4f5a6b7-c8d9-4e0f-8a1b-2c3d4e5f6a7b","result":"created","note":null}]}`},
}

// busy are the answers that differ while another process's run (the CronJob's) holds the
// namespace's Lease.
var busy = map[string]answer{
	"POST /v1/namespaces/streamspace/sessions/collect": {409, "30", `{"error":"namespace streamspace: another process holds its Lease (gc-sessions-29412360-x7k2p) until 2026-12-04T06:02:30Z: nothing was done"}`},
}

// refusals are what the stand-in answers a call it has no answer for, and one without a token.
var refusals = map[string]answer{
	"GET /v1/runs/19ad7c3f1e2a0-9": {404, "", `{"error":"no run 19ad7c3f1e2a0-9"}`},
	"unauthenticated":              {401, "", `{"error":"no bearer token: send a ServiceAccount token projected for audience gc"}`},
}

const (
	running = `{"id":"19ad7c3f1e2a0-1","namespace":"streamspace","sessions":{"ids":["alice-firefox-0000000b"]},
		"requestedBy":"system:serviceaccount:streamspace:streamspace-api","state":"running",
		"requestedAt":"2026-12-04T06:00:00Z","endedAt":null,"error":null,"records":[]}`
	ran = `{"id":"19ad7c3f1e2a0-1","namespace":"streamspace","sessions":{"ids":["alice-firefox-0000000b"]},
		"requestedBy":"system:serviceaccount:streamspace:streamspace-api","state":"succeeded",
		"requestedAt":"2026-12-04T06:00:00Z","endedAt":"2026-12-04T06:00:03Z","error":null,"records":[` + records + `]}`
	records = `
		{"cluster":"prod-eu","namespace":"streamspace","apiVersion":"v1","kind":"PersistentVolumeClaim","name":"alice-firefox-0000000b-home",
		 "uid":"5e8d1f2a-7c4b-4a9e-8f3d-6b2c0a1e9d57","resourceVersion":"41877","created":"2026-12-03T21:14:09Z","deleting":false,
		 "session":"alice-firefox-0000000b","decision":"delete","reason":"session alice-firefox-0000000b: row terminated",
		 "result":"deleted","archive":"s3://gc-archives/prod-eu/streamspace/alice-firefox-0000000b/PersistentVolumeClaim.json","dryRun":false},
		{"cluster":"prod-eu","namespace":"streamspace","apiVersion":"stream.space/v1alpha1","kind":"Session","name":"alice-firefox-0000000b",
		 "uid":"d2b7a0c4-3e51-4f8a-9b6d-1c0e7f2a5b39","resourceVersion":"41902","created":"2026-12-03T21:14:08Z","deleting":false,
		 "session":"alice-firefox-0000000b","decision":"delete","reason":"session alice-firefox-0000000b: row terminated",
		 "result":"deleted","archive":"s3://gc-archives/prod-eu/streamspace/alice-firefox-0000000b/Session.json","dryRun":false}`
)

// fakeGC stands in for gc's request API (`gc-cli serve --api-listen`) on a loopback port.
func fakeGC() *httptest.Server { return standIn(answers) }

// fakeBusyGC stands in for gc's request API while the CronJob's run holds the namespace.
func fakeBusyGC() *httptest.Server { return standIn(busy, answers) }

func standIn(tables ...map[string]answer) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := r.Method + " " + r.URL.RequestURI()
		a, found := refusals["unauthenticated"], true
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			a, found = refusals[call]
			for _, table := range tables {
				if !found {
					a, found = table[call]
				}
			}
		}
		if !found {
			a = answer{404, "", `{"error":"not found"}`}
		}
		w.Header().Set("Content-Type", "application/json")
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
}

// Every answer of the stand-in is what openapi.json describes for its call and status.
func TestTheStandInAnswersAsTheDocumentSays(t *testing.T) {
	for _, table := range []map[string]answer{answers, busy, refusals} {
		for call, a := range table {
			if call == "unauthenticated" {
				call = "GET /v1/status"
			}
			method, path, _ := strings.Cut(call, " ")
			for _, why := range gc.AnswerConforms(t, method, path, a.status, []byte(a.body)) {
				t.Error(why)
			}
		}
	}
}
