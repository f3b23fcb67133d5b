package sqlite

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// sharedValues returns the VALUES rows of a multi-row INSERT of n rows of width columns
// (args holds them one after the other) in which a column that holds one value in every
// row is bound once, and the arguments in the order of their numbers: ?1 … for those
// columns, then each row's other values. Binding is work for the one writer, a copy into
// C memory for each text (modernc), and the rows a write inserts together repeat most of
// theirs: a lease's allocations their lease, reservation and window, its usage records
// all but their allocation and host. The text depends on which columns are shared, which
// is the same for every write of a kind, so the statement cache keeps it.
func sharedValues(width, n int, args []any) (string, []any) {
	shared := make([]bool, width)
	if n > 1 {
		for c := range shared {
			shared[c] = true
			for r := 1; r < n && shared[c]; r++ {
				shared[c] = sameValue(args[r*width+c], args[c])
			}
		}
	}
	out := make([]any, 0, len(args))
	for c, s := range shared {
		if s {
			out = append(out, args[c])
		}
	}
	for r := range n {
		for c, s := range shared {
			if !s {
				out = append(out, args[r*width+c])
			}
		}
	}
	return valuesText(width, n, shared), out
}

// valuesKey names a VALUES text: the rows' width and number, and which columns are shared.
type valuesKey struct {
	width, n int
	shared   uint64
}

// valuesTexts keeps the VALUES texts made (a few a kind of write: their row counts), so
// that the writer builds each once, not once a statement.
var valuesTexts sync.Map // valuesKey → string

// maxValuesTexts bounds valuesTexts, in case a caller's row counts vary without end.
const maxValuesTexts = 1024

// valuesTextsKept counts the texts stored, against maxValuesTexts.
var valuesTextsKept atomic.Int64

// valuesText returns the VALUES rows sharedValues numbers its arguments for, kept by
// shape (valuesTexts) when the shared columns fit a mask.
func valuesText(width, n int, shared []bool) string {
	if width > 64 {
		return buildValuesText(width, n, shared)
	}
	key := valuesKey{width: width, n: n}
	for c, s := range shared {
		if s {
			key.shared |= 1 << c
		}
	}
	if t, ok := valuesTexts.Load(key); ok {
		return t.(string)
	}
	t := buildValuesText(width, n, shared)
	if valuesTextsKept.Add(1) <= maxValuesTexts {
		valuesTexts.Store(key, t)
	}
	return t
}

// buildValuesText writes the VALUES rows: ?1 … for the shared columns, then each row's
// other values in order.
func buildValuesText(width, n int, shared []bool) string {
	num := make([]int, width) // a column's parameter number in the row being written
	k := 0
	for c, s := range shared {
		if s {
			k++
			num[c] = k
		}
	}
	var b strings.Builder
	b.Grow(n * width * 5)
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range width {
			if c > 0 {
				b.WriteString(", ")
			}
			if !shared[c] {
				k++
				num[c] = k
			}
			b.WriteByte('?')
			b.WriteString(strconv.Itoa(num[c]))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// sameValue reports whether two arguments are the same value, of the same kind. Only the
// comparable kinds a row holds are compared (a []byte never counts as the same, and == on
// two of them would panic); interfaces of different kinds are simply unequal.
func sameValue(a, b any) bool {
	switch a.(type) {
	case string, int64, int, float64, bool, nil:
		return a == b
	}
	return false
}
