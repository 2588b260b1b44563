package indexes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefsRoundTripDeterministic(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	for i := 0; i < 500; i++ {
		n := rng.IntN(6)
		keys := make([]string, n)
		vals := make([]int64, n)
		for j := range keys {
			keys[j] = fmt.Sprintf("COL_%d", rng.IntN(1000))
			vals[j] = rng.Int64() >> rng.IntN(63)
		}
		// Build the same map in two insertion orders.
		a, b := map[string]int64{}, map[string]int64{}
		for j := range keys {
			a[keys[j]] = vals[j]
		}
		for j := len(keys) - 1; j >= 0; j-- {
			if _, ok := b[keys[j]]; !ok {
				b[keys[j]] = a[keys[j]]
			}
		}
		ea, eb := EncodeRefs(a), EncodeRefs(b)
		require.Equal(t, ea, eb, "EncodeRefs of equal maps %v built in two orders", a)
		got, err := DecodeRefs(ea)
		require.NoError(t, err, "DecodeRefs(EncodeRefs(%v))", a)
		require.Equal(t, a, got, "DecodeRefs(EncodeRefs(%v))", a)
	}
	for name, b := range map[string][]byte{"EncodeRefs(nil)": EncodeRefs(nil), "nil": nil} {
		got, err := DecodeRefs(b)
		if assert.NoError(t, err, "DecodeRefs(%s)", name) {
			assert.Equal(t, map[string]int64{}, got, "DecodeRefs(%s): want an empty map", name)
		}
	}
}

func TestDecodeRefsRejects(t *testing.T) {
	t.Parallel()
	good := EncodeRefs(map[string]int64{"A": 1, "B": math.MaxInt64})
	bad := map[string][]byte{
		"garbage":       []byte("xyz"),
		"trailing":      append(slices.Clone(good), 0x01),
		"truncated":     good[:len(good)-1],
		"negative":      EncodeRefs(map[string]int64{"A": -1}),
		"not a map":     {0x93, 0x01, 0x02, 0x03},
		"repeated key":  {0x82, 0xa1, 'A', 0x01, 0xa1, 'A', 0x02},
		"int key":       {0x81, 0x01, 0x01},
		"string value":  {0x81, 0xa1, 'A', 0xa1, 'x'},
		"huge length":   {0xdf, 0xff, 0xff, 0xff, 0xff},
		"uint64 beyond": {0x81, 0xa1, 'A', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
	for name, b := range bad {
		got, err := DecodeRefs(b)
		assert.Error(t, err, "DecodeRefs(%s %x) = %v: want an error", name, b, got)
	}
}

// mergeFields: the shard field's column A also holds a1; B and C hold the others.
var mergeFields = []Field{{"k", TypeUUID, "A"}, {"a1", TypeInt, "A"}, {"b1", TypeString, "B"},
	{"b2", TypeBool, "B"}, {"c1", TypeDatetime, "C"}}

// cellUpdate is the update the maintainer makes of one cell: one column's values at a ref key.
type cellUpdate struct {
	column    string
	ref       int64
	values    map[int]any // field index -> value, for the column's fields other than the shard field
	violation int64
}

// toEntry builds the Merge input of some cell updates of the row (distinct columns).
func toEntry(row uuid.UUID, shard any, ups ...cellUpdate) Entry {
	e := Entry{RowKey: row, Values: make([]any, len(mergeFields)), Refs: map[string]int64{}}
	e.Values[0] = shard
	for _, u := range ups {
		e.Refs[u.column] = u.ref
		for i, v := range u.values {
			e.Values[i] = v
		}
		e.Violation = max(e.Violation, u.violation)
	}
	return e
}

// randomUpdates returns updates of random cells with repeats; one (column, ref) always carries
// the same values, as cells are immutable.
func randomUpdates(rng *rand.Rand) []cellUpdate {
	cellsSeen := map[string]cellUpdate{}
	var ups []cellUpdate
	for n := 1 + rng.IntN(25); len(ups) < n; {
		col := []string{"A", "B", "C"}[rng.IntN(3)]
		ref := rng.Int64N(8)
		key := fmt.Sprintf("%s/%d", col, ref)
		u, ok := cellsSeen[key]
		if !ok {
			u = cellUpdate{column: col, ref: ref, values: map[int]any{}}
			for i, f := range mergeFields {
				if i == 0 || f.Column != col {
					continue
				}
				if rng.IntN(4) > 0 {
					u.values[i] = randomTyped(rng, f.Type)
				} else {
					u.values[i] = nil
				}
			}
			if col == "A" && rng.IntN(4) == 0 {
				u.violation = ref
			}
			cellsSeen[key] = u
		}
		ups = append(ups, u)
	}
	return ups
}

// oracle computes the final entry directly: per column the values of its highest ref key, the
// highest violation.
func oracle(row uuid.UUID, shard any, ups []cellUpdate) Entry {
	best := map[string]cellUpdate{}
	var viol int64
	for _, u := range ups {
		if b, ok := best[u.column]; !ok || u.ref > b.ref {
			best[u.column] = u
		}
		viol = max(viol, u.violation)
	}
	var latest []cellUpdate
	for _, u := range best {
		latest = append(latest, u)
	}
	e := toEntry(row, shard, latest...)
	e.Violation = viol
	return e
}

// apply merges the inputs in order, checking changed and non-aliasing at every step.
func apply(t *testing.T, ins []Entry) Entry {
	t.Helper()
	var stored *Entry
	for _, in := range ins {
		inCopy := in.clone()
		var before Entry
		if stored != nil {
			before = stored.clone()
		}
		out, changed := Merge(mergeFields, stored, in)
		if stored == nil {
			require.True(t, changed, "Merge(nil, %+v): changed", in)
		} else {
			require.Equal(t, !reflect.DeepEqual(out, before), changed, "Merge(%+v, %+v) = %+v: changed", before, in, out)
		}
		// out shares nothing with the inputs.
		for i := range out.Values {
			out.Values[i] = "scribble"
		}
		out.Refs["ZZ"] = -5
		require.Equal(t, inCopy, in, "changing Merge's result changed its input")
		if stored != nil {
			require.Equal(t, before, *stored, "changing Merge's result changed the stored entry")
		}
		out, _ = Merge(mergeFields, stored, in)
		stored = &out
	}
	return *stored
}

// Applying the updates of a row in any order, with replays, gives the entry that applying them
// in ref key order gives, which is the entry computed directly.
func TestMergeOrderDoesNotMatter(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	row := randomTyped(rng, TypeUUID).(uuid.UUID)
	shard := randomTyped(rng, TypeUUID)
	for iter := 0; iter < 200; iter++ {
		ups := randomUpdates(rng)
		want := oracle(row, shard, ups)

		sorted := slices.Clone(ups)
		slices.SortStableFunc(sorted, func(a, b cellUpdate) int { return int(a.ref - b.ref) })
		var ins []Entry
		for _, u := range sorted {
			ins = append(ins, toEntry(row, shard, u))
		}
		require.Equal(t, want, apply(t, ins), "iteration %d: in ref key order %+v", iter, sorted)

		for k := 0; k < 5; k++ {
			shuffled := slices.Clone(ups)
			for r := rng.IntN(len(ups) + 1); r > 0; r-- { // replays
				shuffled = append(shuffled, ups[rng.IntN(len(ups))])
			}
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			ins = ins[:0]
			for i := 0; i < len(shuffled); i++ {
				// Sometimes one input carries two cells of different columns.
				if i+1 < len(shuffled) && shuffled[i].column != shuffled[i+1].column && rng.IntN(4) == 0 {
					ins = append(ins, toEntry(row, shard, shuffled[i], shuffled[i+1]))
					i++
					continue
				}
				ins = append(ins, toEntry(row, shard, shuffled[i]))
			}
			require.Equal(t, want, apply(t, ins), "iteration %d: in the order %+v", iter, shuffled)
		}
	}
}

// The shard field keeps the value of the first input, whatever later inputs carry.
func TestMergeKeepsShardField(t *testing.T) {
	t.Parallel()
	rng := testRand(t)
	row := randomTyped(rng, TypeUUID).(uuid.UUID)
	for iter := 0; iter < 500; iter++ {
		ups := randomUpdates(rng)
		first := randomTyped(rng, TypeUUID)
		var stored *Entry
		for i, u := range ups {
			shard := first
			if i > 0 {
				shard = randomTyped(rng, TypeUUID)
			}
			out, _ := Merge(mergeFields, stored, toEntry(row, shard, u))
			require.Equal(t, first, out.Values[0], "after %d updates: the shard field, want the first one's", i+1)
			stored = &out
		}
	}
}

func TestMergeCases(t *testing.T) {
	t.Parallel()
	row := uuid.New()
	s1, s2 := uuid.New(), uuid.New()
	// A new entry takes only the values of the columns in Refs (and the shard value).
	in := Entry{RowKey: row, Values: []any{s1, int64(5), "stale", true, int64(9)}, Refs: map[string]int64{"A": 3}}
	out, changed := Merge(mergeFields, nil, in)
	want := Entry{RowKey: row, Values: []any{s1, int64(5), nil, nil, nil}, Refs: map[string]int64{"A": 3}}
	assert.True(t, changed, "Merge(nil, %+v): changed", in)
	assert.Equal(t, want, out, "Merge(nil, %+v)", in)
	// A short Values is padded to the fields.
	out, _ = Merge(mergeFields, nil, Entry{RowKey: row, Values: []any{s1}, Refs: map[string]int64{"B": 1}})
	assert.Len(t, out.Values, len(mergeFields), "Merge of a short Values")
	stored := want
	cases := []struct {
		name    string
		in      Entry
		want    Entry
		changed bool
	}{
		{"older ref of A", Entry{Values: []any{s2, int64(1), nil, nil, nil}, Refs: map[string]int64{"A": 2}},
			stored, false},
		{"same ref of A (replay)", Entry{Values: []any{s1, int64(5), nil, nil, nil}, Refs: map[string]int64{"A": 3}},
			stored, false},
		{"newer A, another shard value", Entry{Values: []any{s2, nil, nil, nil, nil}, Refs: map[string]int64{"A": 7}, Violation: 7},
			Entry{RowKey: row, Values: []any{s1, nil, nil, nil, nil}, Refs: map[string]int64{"A": 7}, Violation: 7}, true},
		{"new column B", Entry{Values: []any{s1, int64(99), "x", false, nil}, Refs: map[string]int64{"B": 0}},
			Entry{RowKey: row, Values: []any{s1, int64(5), "x", false, nil}, Refs: map[string]int64{"A": 3, "B": 0}}, true},
		{"older violation", Entry{Values: []any{s1}, Refs: map[string]int64{}, Violation: 1},
			Entry{RowKey: row, Values: []any{s1, int64(5), nil, nil, nil}, Refs: map[string]int64{"A": 3}, Violation: 1}, true},
		{"newer ref, same values", Entry{Values: []any{s1, int64(5), nil, nil, nil}, Refs: map[string]int64{"A": 4}},
			Entry{RowKey: row, Values: []any{s1, int64(5), nil, nil, nil}, Refs: map[string]int64{"A": 4}}, true},
	}
	for _, c := range cases {
		c.in.RowKey = row
		got, ch := Merge(mergeFields, &stored, c.in)
		assert.Equal(t, c.changed, ch, "%s: Merge changed", c.name)
		assert.Equal(t, c.want, got, "%s: Merge", c.name)
	}
}
