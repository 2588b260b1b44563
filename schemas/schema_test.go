package schemas

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

const trip = `{
  "type": "object",
  "required": ["origin", "distance"],
  "properties": {
    "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
    "distance": {"type": "integer", "minimum": 0},
    "legs": {"type": "array", "items": {"$ref": "#/$defs/leg"}}
  },
  "$defs": {"leg": {"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}}}
}`

func compile(t *testing.T, text string) *Schema {
	t.Helper()
	s, err := Compile([]byte(text))
	require.NoError(t, err, "Compile(%s)", text)
	return s
}

func TestValidate(t *testing.T) {
	s := compile(t, trip)
	for _, tc := range []struct {
		name, body string
		want       *Violation
	}{
		{"conforms", `{"origin":"SFO","distance":10}`, nil},
		{"extra fields are allowed", `{"origin":"SFO","distance":0,"carrier":"UA"}`, nil},
		{"negative distance", `{"origin":"SFO","distance":-5}`, &Violation{"/distance", "minimum: got -5, want 0"}},
		{"fractional distance", `{"origin":"SFO","distance":1.5}`, &Violation{"/distance", "got number, want integer"}},
		{"missing field points at it", `{"origin":"SFO"}`, &Violation{"/distance", "missing property 'distance'"}},
		{"two missing: the first in pointer order", `{}`, &Violation{"/distance", "missing properties 'distance', 'origin'"}},
		{"pattern", `{"origin":"sfo","distance":1}`, &Violation{"/origin", "'sfo' does not match pattern '^[A-Z]{3}$'"}},
		{"through a $ref, in an array", `{"origin":"SFO","distance":1,"legs":[{"to":"LAX"},{"to":7}]}`, &Violation{"/legs/1/to", "got number, want string"}},
		{"smallest pointer of several", `{"origin":7,"distance":-1}`, &Violation{"/distance", "minimum: got -1, want 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := cells.EncodeBody([]byte(tc.body))
			require.NoError(t, err, "EncodeBody")
			got, err := s.Validate(b)
			require.NoError(t, err, "Validate")
			assert.Equal(t, tc.want, got, "violation of %s", tc.body)
		})
	}
}

// Every run picks the same violation, although the validator visits properties in map order.
func TestValidateDeterministic(t *testing.T) {
	s := compile(t, `{"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"}},"additionalProperties":false}`)
	body := []byte(`{"d":1,"c":2,"b":3,"a":4,"z":5,"y":6}`)
	first, err := s.ValidateJSON(body)
	require.NoError(t, err)
	require.NotNil(t, first, "want a violation")
	assert.Equal(t, Violation{"/a", "got number, want string"}, *first, "the smallest pointer")
	for i := 0; i < 50; i++ {
		v, err := s.ValidateJSON(body)
		require.NoError(t, err)
		require.Equal(t, first, v, "run %d", i)
	}
	s = compile(t, `{"additionalProperties":false}`)
	v, err := s.ValidateJSON([]byte(`{"d":1,"c":2,"b":3}`))
	require.NoError(t, err)
	assert.Equal(t, &Violation{"/b", "additional properties 'b', 'c', 'd' not allowed"}, v, "additional properties, sorted")
}

func TestCompileRefusals(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"not JSON", `{"type":`, "not JSON"},
		{"not an object", `true`, "must be a JSON object"},
		{"another draft", `{"$schema":"http://json-schema.org/draft-07/schema#"}`, "only https://json-schema.org/draft/2020-12/schema"},
		{"a bad keyword value", `{"minimum":"x"}`, "at /minimum"},
		{"an unknown type", `{"type":"strin"}`, "at /type"},
		{"a file reference", `{"$ref":"/etc/passwd"}`, "references outside the schema are not allowed"},
		{"a remote reference", `{"$ref":"https://example.com/s.json"}`, "references outside the schema are not allowed"},
		{"too large", `{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile([]byte(tc.text))
			require.Error(t, err, "Compile must refuse it")
			assert.True(t, errors.Is(err, ErrInvalid), "errors.Is(%v, ErrInvalid)", err)
			assert.Contains(t, err.Error(), tc.want, "message")
		})
	}
}

func TestCanonical(t *testing.T) {
	a, err := Canonical([]byte(" {\n \"type\" : \"object\" }\n"))
	require.NoError(t, err)
	assert.Equal(t, `{"type":"object"}`, string(a), "white space removed")
	s := compile(t, "{ \"$schema\": \""+Draft+"\", \"type\": \"object\" }")
	assert.Equal(t, `{"$schema":"`+Draft+`","type":"object"}`, string(s.Text()), "Text is canonical")
}
