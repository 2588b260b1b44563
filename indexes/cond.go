package indexes

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// condOps are the comparison operators of ParseCond, longest first so that "<=" is not read as
// "<".
var condOps = []string{"!=", "<=", ">=", "=", "<", ">"}

// ParseCond parses a condition written as text, FIELD OP VALUE (the form of `schemaless index
// query --where`), into a Cond. FIELD is [A-Za-z_][A-Za-z0-9_]*; OP is one of = != < <= > >=,
// with or without spaces around it, or the word in (any case, with white space around it);
// VALUE is the rest, trimmed, typed by ParseScalar, and for in a list of comma-separated values
// (commas inside double quotes do not split). The value is not checked against a field type:
// Compile does that. The error says what is wrong without quoting expr: the caller names it.
func ParseCond(expr string) (Cond, error) {
	s := strings.TrimSpace(expr)
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	if i == 0 {
		return Cond{}, errors.New("want FIELD OP VALUE (OP: = != < <= > >= in), starting with a field name")
	}
	c := Cond{Field: s[:i]}
	rest := strings.TrimLeft(s[i:], " \t")
	for _, op := range condOps {
		if strings.HasPrefix(rest, op) {
			c.Op = op
			rest = rest[len(op):]
			break
		}
	}
	if c.Op == "" && len(rest) > 2 && strings.EqualFold(rest[:2], "in") && (rest[2] == ' ' || rest[2] == '\t') && len(rest) < len(s[i:]) {
		c.Op = "in"
		rest = rest[2:]
	}
	if c.Op == "" {
		return c, fmt.Errorf("no operator after field %s (want = != < <= > >= or in)", c.Field)
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return c, fmt.Errorf("no value after %s %s", c.Field, c.Op)
	}
	if c.Op != "in" {
		c.Value = ParseScalar(rest)
		return c, nil
	}
	var list []any
	for j, part := range splitInValues(rest) {
		part = strings.TrimSpace(part)
		if part == "" {
			return c, fmt.Errorf("value %d of the in list is empty", j+1)
		}
		list = append(list, ParseScalar(part))
	}
	c.Value = list
	return c, nil
}

// splitInValues splits an in list at commas outside double quotes.
func splitInValues(s string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// ParseScalar types a value written as text the way a JSON query carries it: a number in
// JSON's grammar as json.Number (written as given: "007" and ".5" are no JSON numbers and
// stay strings), true and false as bools, a double-quoted JSON string as that string (so
// `"94107"` is the string 94107), anything else as the string itself.
func ParseScalar(s string) any {
	switch {
	case s == "true":
		return true
	case s == "false":
		return false
	case isJSONNumber(s):
		return json.Number(s)
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		var out string
		if err := json.Unmarshal([]byte(s), &out); err == nil {
			return out
		}
	}
	return s
}
