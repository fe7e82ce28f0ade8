package gc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// document is the API's OpenAPI document (openapi.json, generated from the server's types and
// checked against them by gc-runtime's tests).
func document(t testing.TB) map[string]any {
	t.Helper()
	text, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func schemasOf(doc map[string]any) map[string]any {
	return doc["components"].(map[string]any)["schemas"].(map[string]any)
}

func ref(name string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// The client's types and what the API's OpenAPI document describes are the same: every field
// of each type is a property of its schema, of a type that decodes it, and every property of
// an answer's schema is a field of its type; each body the client sends is what the server
// takes.
func TestTypesDecodeTheOpenAPIDocument(t *testing.T) {
	schemas := schemasOf(document(t))
	for name, value := range map[string]any{
		"Status": Status{}, "Lane": Lane{}, "NamespaceLease": Lease{}, "RequestedRun": Run{}, "AuditRecord": Record{},
		"Planned": Plan{}, "Judged": Judged{}, "RestoreAnswer": Restoration{}, "Restored": Restored{},
		"Archives": Archives{}, "Archive": Archive{}, "Problem": APIError{}, "Requested": Requested{},
		"Asking": asking{}, "Restoring": restoring{},
	} {
		if schemas[name] == nil {
			t.Errorf("no schema %s", name)
			continue
		}
		for _, why := range decodes(schemas, ref(name), reflect.TypeOf(value), name) {
			t.Error(why)
		}
	}
	// A misnamed field is caught, and so is a property without a field.
	type misnamed struct {
		Version    string   `json:"versoin"`
		Namespaces []string `json:"namespaces"`
		Requests   []Lane   `json:"requests"`
		Leases     []Lease  `json:"leases"`
	}
	if why := decodes(schemas, ref("Status"), reflect.TypeOf(misnamed{}), "misnamed"); len(why) != 2 ||
		!strings.Contains(why[0]+why[1], "misnamed.versoin: not in the document") ||
		!strings.Contains(why[0]+why[1], "misnamed.version: no Go field") {
		t.Errorf("a misnamed field: %q", why)
	}
	type partial struct {
		Judged  []Judged `json:"judged"`
		Scanned int      `json:"scanned"`
	}
	if why := decodes(schemas, ref("Planned"), reflect.TypeOf(partial{}), "partial"); len(why) != 5 {
		t.Errorf("a partial Plan: %q", why)
	}
}

// Each state and decision the document names is a constant of the client.
func TestEveryStateAndDecisionIsAConstant(t *testing.T) {
	schemas := schemasOf(document(t))
	var states []string
	for _, s := range []RunState{RunQueued, RunRunning, RunSucceeded, RunFailed, RunStopped} {
		states = append(states, string(s))
	}
	if want := enumOf(schemas["State"].(map[string]any)); !sameSet(states, want) {
		t.Errorf("states %q, the document's %q", states, want)
	}
	var decisions []string
	for _, d := range []Decision{
		DecisionDelete, DecisionHeld, DecisionKept, DecisionDeferred, DecisionUnrequested,
		DecisionSkipped, DecisionProtected, DecisionExcluded,
	} {
		decisions = append(decisions, string(d))
	}
	var want []string
	for _, branch := range schemas["SessionDecision"].(map[string]any)["oneOf"].([]any) {
		decision := branch.(map[string]any)["properties"].(map[string]any)["decision"].(map[string]any)
		want = append(want, enumOf(decision)...)
	}
	if !sameSet(decisions, want) {
		t.Errorf("decisions %q, the document's %q", decisions, want)
	}
	for _, done := range []RunState{RunSucceeded, RunFailed, RunStopped} {
		if !done.Done() || !(&Run{State: done}).Done() {
			t.Errorf("%s is not done", done)
		}
	}
	if RunQueued.Done() || RunRunning.Done() {
		t.Error("a queued or running request is done")
	}
}

func enumOf(schema map[string]any) []string {
	var out []string
	values, _ := schema["enum"].([]any)
	for _, v := range values {
		out = append(out, v.(string))
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// resolve follows a $ref.
func resolve(schemas map[string]any, schema map[string]any) map[string]any {
	if ref, ok := schema["$ref"].(string); ok {
		return resolve(schemas, schemas[ref[strings.LastIndex(ref, "/")+1:]].(map[string]any))
	}
	return schema
}

// parts are a schema's allOf and oneOf parts.
func parts(schema map[string]any) []map[string]any {
	var out []map[string]any
	for _, key := range []string{"allOf", "oneOf"} {
		list, _ := schema[key].([]any)
		for _, part := range list {
			out = append(out, part.(map[string]any))
		}
	}
	return out
}

// properties are the fields a schema describes, through its allOf and oneOf parts (a property
// of several parts is any of theirs).
func properties(schemas map[string]any, schema map[string]any, out map[string]map[string]any) {
	schema = resolve(schemas, schema)
	for _, part := range parts(schema) {
		properties(schemas, part, out)
	}
	fields, _ := schema["properties"].(map[string]any)
	for name, field := range fields {
		if before, ok := out[name]; ok {
			out[name] = map[string]any{"oneOf": []any{before, field}}
			continue
		}
		out[name] = field.(map[string]any)
	}
}

// kinds are the JSON types a schema allows (through allOf and oneOf), "object" for one with
// properties.
func kinds(schemas map[string]any, schema map[string]any) map[string]bool {
	schema = resolve(schemas, schema)
	out := map[string]bool{}
	switch kind := schema["type"].(type) {
	case string:
		out[kind] = true
	case []any:
		for _, k := range kind {
			out[k.(string)] = true
		}
	}
	for _, part := range parts(schema) {
		for k := range kinds(schemas, part) {
			out[k] = true
		}
	}
	if schema["properties"] != nil {
		out["object"] = true
	}
	return out
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	unixTimeType = reflect.TypeOf(UnixTime{})
)

// decodes says what of the Go type typ the schema does not describe, and what the schema
// describes that typ has no field for.
func decodes(schemas map[string]any, schema map[string]any, typ reflect.Type, at string) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	allowed := kinds(schemas, schema)
	want := map[reflect.Kind]string{
		reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int64: "integer",
		reflect.Float64: "number", reflect.Slice: "array", reflect.Struct: "object", reflect.Map: "object",
	}[typ.Kind()]
	switch typ {
	case timeType: // RFC 3339
		want = "string"
	case unixTimeType: // seconds since the epoch
		want = "number"
	}
	if !allowed[want] && !(want == "number" && allowed["integer"]) {
		return []string{at + ": a Go " + typ.String() + " for " + strings.Join(keys(allowed), "|")}
	}
	if typ == timeType || typ == unixTimeType {
		return nil
	}
	var why []string
	switch typ.Kind() {
	case reflect.Slice:
		items, _ := resolve(schemas, schema)["items"].(map[string]any)
		why = append(why, decodes(schemas, items, typ.Elem(), at+"[]")...)
	case reflect.Map:
		values, _ := resolve(schemas, schema)["additionalProperties"].(map[string]any)
		if typ.Key().Kind() != reflect.String || values == nil {
			return []string{at + ": a Go " + typ.String() + " for an object of no additionalProperties"}
		}
		why = append(why, decodes(schemas, values, typ.Elem(), at+"{}")...)
	case reflect.Struct:
		described := map[string]map[string]any{}
		properties(schemas, schema, described)
		fields := map[string]bool{}
		for _, field := range visible(typ) {
			fields[field.name] = true
			property, ok := described[field.name]
			if !ok {
				why = append(why, at+"."+field.name+": not in the document")
				continue
			}
			why = append(why, decodes(schemas, property, field.typ, at+"."+field.name)...)
		}
		for _, name := range sortedKeys(described) {
			if !fields[name] {
				why = append(why, at+"."+name+": no Go field")
			}
		}
	}
	return why
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// visible are the fields encoding/json decodes into, embedded structs' included.
func visible(typ reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && tag == "":
			out = append(out, visible(f.Type)...)
		case tag == "-" || tag == "" || !f.IsExported():
		default:
			out = append(out, jsonField{tag, f.Type})
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// answerConforms says how body, answered with status to method path (with its query), is not
// what the document describes for that call: an unknown call or status, a value of another
// type, a property not described or a required one missing, a string outside its enum.
func answerConforms(t testing.TB, method, path string, status int, body []byte) []string {
	doc := document(t)
	schemas := schemasOf(doc)
	path, _, _ = strings.Cut(path, "?")
	var operation map[string]any
	for template, item := range doc["paths"].(map[string]any) {
		if matches(template, path) {
			operation, _ = item.(map[string]any)[strings.ToLower(method)].(map[string]any)
		}
	}
	if operation == nil {
		return []string{fmt.Sprintf("%s %s: no such call in the document", method, path)}
	}
	response, _ := operation["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
	if response == nil {
		return []string{fmt.Sprintf("%s %s: the document has no answer %d", method, path, status)}
	}
	schema := response["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return []string{fmt.Sprintf("%s %s: %v", method, path, err)}
	}
	return conforms(schemas, schema, value, fmt.Sprintf("%s %s %d", method, path, status))
}

// matches says whether path is an instance of the document's path template.
func matches(template, path string) bool {
	want, got := strings.Split(template, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if !strings.HasPrefix(want[i], "{") && want[i] != got[i] {
			return false
		}
	}
	return true
}

// conforms says how value is not what schema describes.
func conforms(schemas map[string]any, schema map[string]any, value any, at string) []string {
	allowed := kinds(schemas, schema)
	kind := map[bool]string{true: "null"}[value == nil]
	switch v := value.(type) {
	case bool:
		kind = "boolean"
	case string:
		kind = "string"
	case json.Number:
		kind = "number"
		if _, err := v.Int64(); err == nil {
			kind = "integer"
		}
	case []any:
		kind = "array"
	case map[string]any:
		kind = "object"
	}
	if !allowed[kind] && !(kind == "integer" && allowed["number"]) {
		return []string{fmt.Sprintf("%s: a JSON %s for %s", at, kind, strings.Join(keys(allowed), "|"))}
	}
	var why []string
	switch v := value.(type) {
	case string:
		if !enumAllows(schemas, schema, v) {
			why = append(why, fmt.Sprintf("%s: %q is none of the values the document names", at, v))
		}
	case []any:
		var items map[string]any
		for _, s := range append(parts(resolve(schemas, schema)), schema) {
			if i, ok := resolve(schemas, s)["items"].(map[string]any); ok {
				items = i
			}
		}
		for i, item := range v {
			why = append(why, conforms(schemas, items, item, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case map[string]any:
		described := map[string]map[string]any{}
		properties(schemas, schema, described)
		values, _ := resolve(schemas, schema)["additionalProperties"].(map[string]any)
		for _, name := range sortedKeys(v) {
			property, ok := described[name]
			if !ok && values != nil {
				property, ok = values, true
			}
			if !ok {
				why = append(why, at+"."+name+": not in the document")
				continue
			}
			why = append(why, conforms(schemas, property, v[name], at+"."+name)...)
		}
		for _, name := range missing(schemas, schema, v) {
			why = append(why, at+"."+name+": required, missing")
		}
	}
	return why
}

// enumAllows says whether s is a value the schema allows: any, or one of its enum's (through
// oneOf, of any of its parts').
func enumAllows(schemas map[string]any, schema map[string]any, s string) bool {
	schema = resolve(schemas, schema)
	if enum, ok := schema["enum"].([]any); ok {
		return slices.Contains(enum, any(s))
	}
	var textual []map[string]any
	for _, part := range parts(schema) {
		if kinds(schemas, part)["string"] {
			textual = append(textual, part)
		}
	}
	if len(textual) == 0 {
		return true
	}
	for _, part := range textual {
		if enumAllows(schemas, part, s) {
			return true
		}
	}
	return false
}

// missing are the properties schema requires that object lacks (through allOf; of oneOf's
// objects, those of the one whose enums object matches).
func missing(schemas map[string]any, schema map[string]any, object map[string]any) []string {
	schema = resolve(schemas, schema)
	var out []string
	required, _ := schema["required"].([]any)
	for _, name := range required {
		if _, ok := object[name.(string)]; !ok {
			out = append(out, name.(string))
		}
	}
	all, _ := schema["allOf"].([]any)
	for _, part := range all {
		out = append(out, missing(schemas, part.(map[string]any), object)...)
	}
	one, _ := schema["oneOf"].([]any)
	branches := 0
	for _, part := range one {
		part := resolve(schemas, part.(map[string]any))
		if !kinds(schemas, part)["object"] {
			continue
		}
		branches++
		fields, _ := part["properties"].(map[string]any)
		fits := len(missing(schemas, part, object)) == 0
		for name, field := range fields {
			if s, ok := object[name].(string); ok && !enumAllows(schemas, field.(map[string]any), s) {
				fits = false
			}
		}
		if fits {
			return out
		}
	}
	if branches > 0 {
		out = append(out, "(what any oneOf object requires)")
	}
	return out
}

// The checker of answers catches what it is for.
func TestAnswersAreCheckedAgainstTheDocument(t *testing.T) {
	good := `{"session":"s","archives":[{"apiVersion":"v1","kind":"Service","name":"s","uid":"u",
		"runAt":"2026-12-04T06:00:00Z","uri":"file:///a","sha256":"ab","bytes":12,"retainedVolume":null,"volumePolicy":null}]}`
	if why := answerConforms(t, "GET", "/v1/namespaces/streamspace/archives?session=s", 200, []byte(good)); len(why) != 0 {
		t.Errorf("a good answer: %q", why)
	}
	for body, want := range map[string]string{
		`{"session":"s"}`: "archives: required, missing",
		`{"session":"s","archives":[{"apiVersion":"v1","kind":"Service","name":"s","uid":"u","runAt":"x","uri":"u","sha256":"a","bytes":1.5}]}`: "bytes: a JSON number for integer",
		`{"session":"s","archives":[],"extra":1}`: "extra: not in the document",
	} {
		why := answerConforms(t, "GET", "/v1/namespaces/streamspace/archives", 200, []byte(body))
		if len(why) != 1 || !strings.Contains(why[0], want) {
			t.Errorf("%s: %q, want %q", body, why, want)
		}
	}
	run := `{"id":"r","namespace":"n","sessions":"some","requestedBy":"me","state":"done","requestedAt":"2026-12-04T06:00:00Z",
		"records":[{"apiVersion":"v1","kind":"Service","name":"s","uid":"u","resourceVersion":"1","deleting":false,
		"decision":"gone","reason":"r","cluster":"c","namespace":"n","dryRun":false}]}`
	why := strings.Join(answerConforms(t, "GET", "/v1/runs/r", 200, []byte(run)), "\n")
	for _, want := range []string{`sessions: "some"`, `state: "done"`, `decision: "gone"`} {
		if !strings.Contains(why, want) {
			t.Errorf("%s not caught: %s", want, why)
		}
	}
	if why := answerConforms(t, "GET", "/v1/runs/r", 418, []byte(`{}`)); len(why) != 1 {
		t.Errorf("an answer the document does not have: %q", why)
	}
}
