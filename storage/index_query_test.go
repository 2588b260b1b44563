package storage

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refQuery is the reference evaluator of IndexQuery: SQL's NULL rules, NULLs first ascending
// and last descending, ties broken by row key, keyset, limit.
func refQuery(t *IndexTable, entries []IndexEntry, q IndexQuery) []IndexEntry {
	var out []IndexEntry
	for _, e := range entries {
		if e.Values[0] == nil || cmpIndexValue(e.Values[0], q.ShardValue) != 0 {
			continue
		}
		ok := true
		for _, c := range q.Where {
			ok = ok && refCond(e.Values[c.Column], c)
		}
		if ok {
			out = append(out, e)
		}
	}
	order := func(v any, rk uuid.UUID, e IndexEntry) int {
		c := 0
		if q.OrderBy >= 0 {
			c = cmpIndexValue(v, e.Values[q.OrderBy])
		}
		if c == 0 {
			c = bytes.Compare(rk[:], e.RowKey[:])
		}
		if q.Desc {
			c = -c
		}
		return c
	}
	slices.SortFunc(out, func(a, b IndexEntry) int {
		var av any
		if q.OrderBy >= 0 {
			av = a.Values[q.OrderBy]
		}
		return order(av, a.RowKey, b)
	})
	if q.After != nil {
		out = slices.DeleteFunc(out, func(e IndexEntry) bool { return order(q.After.Value, q.After.RowKey, e) >= 0 })
	}
	return out[:min(len(out), q.Limit)]
}

// refCond evaluates a condition on v by SQL's rules: NULL matches nothing.
func refCond(v any, c IndexCond) bool {
	if v == nil {
		return false
	}
	if c.Op == "in" {
		for _, x := range c.Values {
			if cmpIndexValue(v, x) == 0 {
				return true
			}
		}
		return false
	}
	r := cmpIndexValue(v, c.Values[0])
	switch c.Op {
	case "=":
		return r == 0
	case "!=":
		return r != 0
	case "<":
		return r < 0
	case "<=":
		return r <= 0
	case ">":
		return r > 0
	}
	return r >= 0
}

// cmpIndexValue orders two values of one kind, nil first.
func cmpIndexValue(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch x := a.(type) {
	case uuid.UUID:
		y := b.(uuid.UUID)
		return bytes.Compare(x[:], y[:])
	case string:
		return strings.Compare(x, b.(string))
	case int64:
		return cmp.Compare(x, b.(int64))
	case float64:
		return cmp.Compare(x, b.(float64))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	}
	panic(fmt.Sprintf("value of type %T", a))
}

var indexOpList = []string{"=", "!=", "<", "<=", ">", ">=", "in"}

// randCond is a random condition of op on a random column, with values from the pools.
func randCond(r *rand.Rand, t *IndexTable, op string) IndexCond {
	c := IndexCond{Column: r.IntN(len(t.Columns)), Op: op}
	n := 1
	if op == "in" {
		n = 1 + r.IntN(3)
	}
	for range n {
		c.Values = append(c.Values, randValue(r, t.Columns[c.Column].Kind, 0))
	}
	return c
}

func describeQuery(q IndexQuery) string {
	var b strings.Builder
	fmt.Fprintf(&b, "shard value %v", q.ShardValue)
	for _, c := range q.Where {
		fmt.Fprintf(&b, " AND col%d %s %q", c.Column, c.Op, fmt.Sprint(c.Values))
	}
	fmt.Fprintf(&b, " ORDER BY %d desc=%v LIMIT %d", q.OrderBy, q.Desc, q.Limit)
	if q.After != nil {
		fmt.Fprintf(&b, " AFTER (%#v, %s)", q.After.Value, q.After.RowKey)
	}
	return b.String()
}

// QueryIndex equals the reference evaluator on a random data set, for every operator and
// every order, paged with cursors of random limits until exhausted.
func TestIndexQueryReference(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		p := openPartition(t, e.open(t), "trips", 0, 0, 1)
		tbl := kindsTable("ref_v1")
		require.NoError(t, p.EnsureIndex(ctx, tbl, []int{1}))
		shardValues := []int64{-1, 2, 3}
		ref := map[uuid.UUID]IndexEntry{}
		for batch := range 3 {
			var es []IndexEntry
			for range 150 {
				// Later batches replace some rows of earlier ones.
				rk := rowKey(r.IntN(400))
				if batch == 0 {
					rk = rowKey(len(ref) + len(es))
				}
				en := randEntry(r, &tbl, rk, shardValues)
				es = append(es, en)
				ref[rk] = en
			}
			upsertIndex(t, p, 1, tbl, es)
		}
		entries := byRowKey(ref)
		queries, pages := 0, 0
		for orderBy := -1; orderBy < len(tbl.Columns); orderBy++ {
			for _, desc := range []bool{false, true} {
				for i := range len(indexOpList) + 2 {
					q := IndexQuery{ShardValue: shardValues[r.IntN(len(shardValues))], OrderBy: orderBy, Desc: desc}
					switch {
					case i < len(indexOpList):
						q.Where = append(q.Where, randCond(r, &tbl, indexOpList[i]))
					case i == len(indexOpList):
						q.Where = append(q.Where, randCond(r, &tbl, indexOpList[r.IntN(len(indexOpList))]),
							randCond(r, &tbl, indexOpList[r.IntN(len(indexOpList))]))
					}
					queries++
					seen := map[uuid.UUID]bool{}
					var all []IndexEntry
					for page := 0; ; page++ {
						q.Limit = 1 + r.IntN(40)
						got, err := p.QueryIndex(ctx, 1, tbl, q)
						require.NoError(t, err, "QueryIndex(%s)", describeQuery(q))
						pages++
						want := refQuery(&tbl, entries, q)
						checkEntries(t, fmt.Sprintf("seed %d: page %d of %s", seed, page, describeQuery(q)), got, want)
						if t.Failed() {
							return
						}
						for _, en := range got {
							require.False(t, seen[en.RowKey], "seed %d: %s: row %s returned twice", seed, describeQuery(q), en.RowKey)
							seen[en.RowKey] = true
						}
						all = append(all, got...)
						if len(got) < q.Limit {
							break
						}
						last := got[len(got)-1]
						q.After = &IndexCursor{RowKey: last.RowKey}
						if orderBy >= 0 {
							q.After.Value = last.Values[orderBy]
						}
					}
					q.After, q.Limit = nil, MaxIndexQueryLimit
					checkEntries(t, fmt.Sprintf("seed %d: pages of %s", seed, describeQuery(q)), all, refQuery(&tbl, entries, q))
				}
			}
		}
		t.Logf("%d queries, %d pages, equal to the reference", queries, pages)
	})
}

// A cursor whose value is NULL pages through the NULLs (first ascending, last descending), and
// conditions never match a NULL, not even != and in.
func TestIndexQueryNulls(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		tbl := IndexTable{Name: "nulls_v1", Columns: []IndexColumn{{"s", IndexString}, {"v", IndexInt}}}
		require.NoError(t, p.EnsureIndex(ctx, tbl, []int{0}))
		var es []IndexEntry
		for i := range 6 {
			var v any
			if i%2 == 0 {
				v = int64(i)
			}
			es = append(es, IndexEntry{RowKey: rowKey(i), Values: []any{"x", v}})
		}
		upsertIndex(t, p, 0, tbl, es)
		// Row keys of the NULL entries in row key order, and of the values in value order.
		nulls := []uuid.UUID{rowKey(1), rowKey(3), rowKey(5)}
		slices.SortFunc(nulls, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		vals := []uuid.UUID{rowKey(0), rowKey(2), rowKey(4)}
		keys := func(es []IndexEntry) []uuid.UUID {
			var out []uuid.UUID
			for _, e := range es {
				out = append(out, e.RowKey)
			}
			return out
		}
		query := func(q IndexQuery) []uuid.UUID {
			t.Helper()
			q.ShardValue, q.Limit = "x", 100
			got, err := p.QueryIndex(ctx, 0, tbl, q)
			require.NoError(t, err, "QueryIndex(%s)", describeQuery(q))
			return keys(got)
		}
		rev := func(s []uuid.UUID) []uuid.UUID { s = slices.Clone(s); slices.Reverse(s); return s }
		for _, tc := range []struct {
			name string
			q    IndexQuery
			want []uuid.UUID
		}{
			{"ascending", IndexQuery{OrderBy: 1}, append(slices.Clone(nulls), vals...)},
			{"descending", IndexQuery{OrderBy: 1, Desc: true}, append(rev(vals), rev(nulls)...)},
			{"ascending after the first NULL", IndexQuery{OrderBy: 1, After: &IndexCursor{nil, nulls[0]}}, append(slices.Clone(nulls[1:]), vals...)},
			{"ascending after the last NULL", IndexQuery{OrderBy: 1, After: &IndexCursor{nil, nulls[2]}}, vals},
			{"descending after the last value", IndexQuery{OrderBy: 1, Desc: true, After: &IndexCursor{int64(0), rowKey(0)}}, rev(nulls)},
			{"descending after a NULL", IndexQuery{OrderBy: 1, Desc: true, After: &IndexCursor{nil, nulls[2]}}, rev(nulls[:2])},
			{"!= 2", IndexQuery{OrderBy: -1, Where: []IndexCond{{1, "!=", []any{int64(2)}}}}, []uuid.UUID{rowKey(0), rowKey(4)}},
			{"in (0, 4)", IndexQuery{OrderBy: 1, Where: []IndexCond{{1, "in", []any{int64(4), int64(0)}}}}, []uuid.UUID{rowKey(0), rowKey(4)}},
			{">= min", IndexQuery{OrderBy: 1, Where: []IndexCond{{1, ">=", []any{int64(math.MinInt64)}}}}, vals},
		} {
			assert.Equal(t, tc.want, query(tc.q), tc.name)
		}
	})
}

// Bad queries return ErrInvalidQuery, bad shards ErrShardRange, bad tables ErrInvalidConfig.
func TestIndexQueryErrors(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		tbl := kindsTable("errs_v1")
		ok := IndexQuery{ShardValue: int64(1), OrderBy: -1, Limit: 10}
		require.NoError(t, errOf(p.QueryIndex(ctx, 0, tbl, ok)), "valid query on a missing table")
		with := func(f func(q *IndexQuery)) IndexQuery {
			q := ok
			f(&q)
			return q
		}
		for _, tc := range []struct {
			name string
			q    IndexQuery
		}{
			{"limit 0", with(func(q *IndexQuery) { q.Limit = 0 })},
			{"limit too large", with(func(q *IndexQuery) { q.Limit = MaxIndexQueryLimit + 1 })},
			{"nil shard value", with(func(q *IndexQuery) { q.ShardValue = nil })},
			{"shard value of the wrong type", with(func(q *IndexQuery) { q.ShardValue = "1" })},
			{"order by -2", with(func(q *IndexQuery) { q.OrderBy = -2 })},
			{"order by out of range", with(func(q *IndexQuery) { q.OrderBy = len(tbl.Columns) })},
			{"column out of range", with(func(q *IndexQuery) { q.Where = []IndexCond{{len(tbl.Columns), "=", []any{int64(1)}}} })},
			{"negative column", with(func(q *IndexQuery) { q.Where = []IndexCond{{-1, "=", []any{int64(1)}}} })},
			{"unknown operator", with(func(q *IndexQuery) { q.Where = []IndexCond{{3, "<>", []any{int64(1)}}} })},
			{"= with two values", with(func(q *IndexQuery) { q.Where = []IndexCond{{3, "=", []any{int64(1), int64(2)}}} })},
			{"< with no value", with(func(q *IndexQuery) { q.Where = []IndexCond{{3, "<", nil}} })},
			{"in with no value", with(func(q *IndexQuery) { q.Where = []IndexCond{{3, "in", nil}} })},
			{"nil value", with(func(q *IndexQuery) { q.Where = []IndexCond{{3, "=", []any{nil}}} })},
			{"value of the wrong type", with(func(q *IndexQuery) { q.Where = []IndexCond{{1, "=", []any{"not a uuid"}}} })},
			{"long string", with(func(q *IndexQuery) { q.Where = []IndexCond{{2, "=", []any{strings.Repeat("x", 256)}}} })},
			{"cursor value of the wrong type", with(func(q *IndexQuery) { q.OrderBy = 4; q.After = &IndexCursor{Value: int64(1)} })},
		} {
			if _, err := p.QueryIndex(ctx, 0, tbl, tc.q); !assert.ErrorIs(t, err, ErrInvalidQuery, "QueryIndex with %s", tc.name) {
				continue
			} else if testing.Verbose() {
				t.Logf("%s: %v", tc.name, err)
			}
		}
		assert.ErrorIs(t, errOf(p.QueryIndex(ctx, 1, tbl, ok)), ErrShardRange, "QueryIndex on shard 1 of [0, 0]")
		assert.ErrorIs(t, errOf(p.QueryIndex(ctx, 0, IndexTable{Name: "x"}, ok)), ErrInvalidConfig, "QueryIndex of a table with no column")
	})
}

// Every order of QueryIndex is served by an index of the table: no table scan and no sort.
func TestIndexQueryPlans(t *testing.T) {
	t.Parallel()
	forEachSQLEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		tbl := kindsTable("plan_v1")
		require.NoError(t, p.EnsureIndex(ctx, tbl, []int{0}))
		r := rand.New(rand.NewPCG(3, 4))
		var es []IndexEntry
		for i := range 3000 {
			es = append(es, randEntry(r, &tbl, rowKey(i), []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
		}
		upsertIndex(t, p, 0, tbl, es)
		analyze := "ANALYZE"
		if e.name == EngineMySQL {
			analyze = "ANALYZE TABLE " + p.d.indexTable(tbl.Name, 0)
		}
		require.NoError(t, errOf(p.write.Exec(analyze)), analyze)
		for orderBy := -1; orderBy < len(tbl.Columns); orderBy++ {
			for _, desc := range []bool{false, true} {
				q := IndexQuery{ShardValue: int64(3), OrderBy: orderBy, Desc: desc, Limit: 50, After: &IndexCursor{RowKey: rowKey(5)}}
				if orderBy >= 0 {
					q.After.Value = es[0].Values[orderBy]
					if orderBy == 0 {
						q.After.Value = q.ShardValue
					} else if q.After.Value == nil {
						q.After.Value = randValue(r, tbl.Columns[orderBy].Kind, 0)
					}
				}
				for _, first := range []bool{true, false} {
					q, name := q, fmt.Sprintf("order by %d desc=%v, after a cursor", orderBy, desc)
					if first {
						q.After, name = nil, fmt.Sprintf("order by %d desc=%v, first page", orderBy, desc)
					}
					stmt, args, err := p.d.indexQuerySQL(&tbl, 0, &q)
					require.NoError(t, err)
					plan := explainRows(t, p.read, e.name, stmt, args...)
					key := fmt.Sprintf("by_%d", max(orderBy, 0))
					for _, row := range plan {
						if e.name == EngineSQLite {
							d := row["detail"]
							assert.True(t, strings.HasPrefix(d, "SEARCH") && strings.Contains(d, "_"+key+" ") && !strings.Contains(d, "TEMP B-TREE"),
								"%s: plan step %q; want a search of index %s, no sort", name, d, key)
						} else {
							assert.True(t, row["type"] != "ALL" && row["key"] == key && !strings.Contains(row["extra"], "filesort"),
								"%s: plan uses key %q, type %q, extra %q; want index %s, no scan, no filesort (%v)", name, row["key"], row["type"], row["extra"], key, row)
						}
					}
					if t.Failed() || testing.Verbose() {
						t.Logf("%s: %s\nplan: %v", name, stmt, plan)
					}
				}
			}
		}
	})
}
