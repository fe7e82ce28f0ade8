package gc

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The client's types decode what the API's OpenAPI document (openapi.json, generated from the
// server's types and checked against them by gc-runtime's tests) describes: every field of each
// type is a field of its schema, of a type that decodes it; and each body the client sends is
// what the server takes.
func TestTypesDecodeTheOpenAPIDocument(t *testing.T) {
	text, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, value := range map[string]any{
		"Status": Status{}, "Lane": Lane{}, "NamespaceLease": Lease{}, "RequestedRun": Run{}, "AuditRecord": Record{},
		"Planned": Plan{}, "Judged": Judged{}, "RestoreAnswer": Restoration{}, "Restored": Restored{},
		"Archives": Archives{}, "Archive": Archive{}, "Problem": APIError{},
		"Asking": asking{}, "Restoring": restoring{},
	} {
		if schemas[name] == nil {
			t.Errorf("no schema %s", name)
			continue
		}
		ref := map[string]any{"$ref": "#/components/schemas/" + name}
		for _, why := range decodes(schemas, ref, reflect.TypeOf(value), name) {
			t.Error(why)
		}
	}
	// A misnamed field is caught.
	type misnamed struct {
		Version string `json:"versoin"`
	}
	ref := map[string]any{"$ref": "#/components/schemas/Status"}
	if len(decodes(schemas, ref, reflect.TypeOf(misnamed{}), "misnamed")) == 0 {
		t.Error("a misnamed field was not caught")
	}
}

// resolve follows a $ref.
func resolve(schemas map[string]any, schema map[string]any) map[string]any {
	if ref, ok := schema["$ref"].(string); ok {
		return resolve(schemas, schemas[ref[strings.LastIndex(ref, "/")+1:]].(map[string]any))
	}
	return schema
}

// properties are the fields a schema describes, through its allOf and oneOf parts.
func properties(schemas map[string]any, schema map[string]any, out map[string]map[string]any) {
	schema = resolve(schemas, schema)
	for _, key := range []string{"allOf", "oneOf"} {
		parts, _ := schema[key].([]any)
		for _, part := range parts {
			properties(schemas, part.(map[string]any), out)
		}
	}
	fields, _ := schema["properties"].(map[string]any)
	for name, field := range fields {
		out[name] = field.(map[string]any)
	}
}

// kinds are the JSON types a schema allows (through oneOf), "object" for one with properties.
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
	for _, key := range []string{"allOf", "oneOf"} {
		parts, _ := schema[key].([]any)
		for _, part := range parts {
			for k := range kinds(schemas, part.(map[string]any)) {
				out[k] = true
			}
		}
	}
	if schema["properties"] != nil {
		out["object"] = true
	}
	return out
}

// decodes says what of the Go type typ the schema does not describe.
func decodes(schemas map[string]any, schema map[string]any, typ reflect.Type, at string) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	allowed := kinds(schemas, schema)
	want := map[reflect.Kind]string{
		reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int64: "integer",
		reflect.Float64: "number", reflect.Slice: "array", reflect.Struct: "object",
	}[typ.Kind()]
	if !allowed[want] && !(want == "integer" && allowed["number"]) && !(want == "number" && allowed["integer"]) {
		return []string{at + ": a Go " + typ.String() + " for " + strings.Join(keys(allowed), "|")}
	}
	var why []string
	switch typ.Kind() {
	case reflect.Slice:
		items, _ := resolve(schemas, schema)["items"].(map[string]any)
		why = append(why, decodes(schemas, items, typ.Elem(), at+"[]")...)
	case reflect.Struct:
		described := map[string]map[string]any{}
		properties(schemas, schema, described)
		for _, field := range visible(typ) {
			property, ok := described[field.name]
			if !ok {
				why = append(why, at+"."+field.name+": not in the document")
				continue
			}
			why = append(why, decodes(schemas, property, field.typ, at+"."+field.name)...)
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
	return out
}
