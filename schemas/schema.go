package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/schemaless-db/schemaless/cells"
)

// MaxSchemaBytes bounds the canonical text of a schema.
const MaxSchemaBytes = 64 << 10

// Draft is the only dialect a schema may name in "$schema" (it may also leave "$schema" out).
const Draft = "https://json-schema.org/draft/2020-12/schema"

// ErrInvalid: a schema that is not a JSON object, names another draft, refers outside itself,
// is larger than MaxSchemaBytes or does not compile. The error's text says why.
var ErrInvalid = errors.New("schemas: invalid schema")

// resourceURL is the URL a schema is compiled under; "$ref" to anything else than a part of
// the schema itself (or a meta-schema of the draft) fails.
const resourceURL = "schemaless:///schema.json"

// Schema is a compiled schema and its canonical text. It is immutable and safe for concurrent
// use.
type Schema struct {
	text     []byte
	compiled *jsonschema.Schema
}

// Canonical returns the canonical text of a schema: text with insignificant white space
// removed (json.Compact; member order and number spelling are kept). Two registrations of a
// column are the same when their canonical texts are equal. Errors wrap ErrInvalid (text is
// not JSON).
func Canonical(text []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, bytes.TrimSpace(text)); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
	}
	return buf.Bytes(), nil
}

// Compile compiles text, a JSON Schema (draft 2020-12) that must be a JSON object. Errors wrap
// ErrInvalid and say what is wrong: not JSON, not an object, larger than MaxSchemaBytes once
// canonical, another "$schema", a "$ref" outside the schema, or a keyword with a bad value
// ("minimum": "x").
func Compile(text []byte) (*Schema, error) {
	canon, err := Canonical(text)
	if err != nil {
		return nil, err
	}
	if len(canon) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(canon), MaxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: a schema must be a JSON object", ErrInvalid)
	}
	if d, ok := obj["$schema"]; ok && d != Draft && d != Draft+"#" {
		return nil, fmt.Errorf("%w: $schema %v: only %s is supported", ErrInvalid, d, Draft)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	compiled, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, compileMessage(err))
	}
	return &Schema{text: canon, compiled: compiled}, nil
}

// Text returns the schema's canonical text. The slice must not be modified.
func (s *Schema) Text() []byte { return s.text }

// noLoader refuses every URL: a schema is self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references outside the schema are not allowed (%s)", url)
}

// compileMessage shortens the compiler's errors: the meta-schema's verdict on a keyword, or a
// refused reference, without the compiler's URL prefixes.
func compileMessage(err error) string {
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			v := pick(ve)
			return fmt.Sprintf("at %s: %s", quotePointer(v.Pointer), v.Message)
		}
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return strings.ReplaceAll(err.Error(), resourceURL, "schema")
}

func quotePointer(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

// Violation is why a body fails a schema: Pointer is the JSON pointer (RFC 6901) of the
// failing field in the body ("" for the body itself; for a missing required field, the field
// it names), Message the validator's words ("minimum: got -5, want 0").
type Violation struct {
	Pointer string
	Message string
}

// Validate checks body against s and returns nil when it conforms, or the first violation: of
// everything the validator reports, the one with the smallest pointer (then message), so
// that every replica answers the same. An error means the body could not be decoded.
func (s *Schema) Validate(body cells.Body) (*Violation, error) {
	text, err := body.JSON()
	if err != nil {
		return nil, fmt.Errorf("schemas: decode body: %w", err)
	}
	return s.ValidateJSON(text)
}

// ValidateJSON is Validate for a body given as JSON text. An error means text is not JSON.
func (s *Schema) ValidateJSON(text []byte) (*Violation, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("schemas: decode body: %w", err)
	}
	err = s.compiled.Validate(doc)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, fmt.Errorf("schemas: validate: %w", err)
	}
	v := pick(ve)
	return &v, nil
}

var printer = message.NewPrinter(language.Und)

// pick returns the smallest (pointer, message) violation among the leaves of e.
func pick(e *jsonschema.ValidationError) Violation {
	var all []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		all = append(all, leaf(e))
	}
	walk(e)
	if len(all) == 0 {
		return Violation{Message: "does not match the schema"}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Pointer != all[j].Pointer {
			return all[i].Pointer < all[j].Pointer
		}
		return all[i].Message < all[j].Message
	})
	return all[0]
}

// leaf describes one leaf error. A missing required (or dependent required) property and an
// additional property that is not allowed point at that property; lists are sorted, since
// the validator builds some of them in map order.
func leaf(e *jsonschema.ValidationError) Violation {
	ptr := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			sort.Strings(k.Missing)
			ptr += "/" + escape(k.Missing[0])
		}
	case *kind.DependentRequired:
		if len(k.Missing) > 0 {
			sort.Strings(k.Missing)
			ptr += "/" + escape(k.Missing[0])
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			sort.Strings(k.Properties)
			ptr += "/" + escape(k.Properties[0])
		}
	}
	return Violation{Pointer: ptr, Message: describe(e.ErrorKind)}
}

// describe words an error kind as the validator does, except that numbers are written plainly
// (the validator's printer groups digits: "2,000").
func describe(k jsonschema.ErrorKind) string {
	num := func(r *big.Rat) string {
		if r.IsInt() {
			return r.Num().String()
		}
		f, _ := r.Float64()
		return fmt.Sprint(f)
	}
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("minimum: got %s, want %s", num(k.Got), num(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("maximum: got %s, want %s", num(k.Got), num(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("exclusiveMinimum: got %s, want more than %s", num(k.Got), num(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("exclusiveMaximum: got %s, want less than %s", num(k.Got), num(k.Want))
	case *kind.MultipleOf:
		return fmt.Sprintf("multipleOf: got %s, not a multiple of %s", num(k.Got), num(k.Want))
	case *kind.MinProperties:
		return fmt.Sprintf("minProperties: got %d, want %d", k.Got, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("maxProperties: got %d, want %d", k.Got, k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("minItems: got %d, want %d", k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("maxItems: got %d, want %d", k.Got, k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("minLength: got %d, want %d", k.Got, k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("maxLength: got %d, want %d", k.Got, k.Want)
	case *kind.AdditionalItems:
		return fmt.Sprintf("last %d additionalItem(s) not allowed", k.Count)
	case *kind.UniqueItems:
		return fmt.Sprintf("items at %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinContains:
		return fmt.Sprintf("minContains: %d items match the contains schema, want %d", len(k.Got), k.Want)
	case *kind.MaxContains:
		return fmt.Sprintf("maxContains: %d items match the contains schema, want at most %d", len(k.Got), k.Want)
	}
	return k.LocalizedString(printer)
}

// pointer is the JSON pointer of tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}
