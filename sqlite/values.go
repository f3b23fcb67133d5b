package sqlite

import (
	"strconv"
	"strings"
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
	num := make([]int, width) // a shared column's parameter number
	for c, s := range shared {
		if s {
			out = append(out, args[c])
			num[c] = len(out)
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
			k := num[c]
			if !shared[c] {
				out = append(out, args[r*width+c])
				k = len(out)
			}
			b.WriteByte('?')
			b.WriteString(strconv.Itoa(k))
		}
		b.WriteByte(')')
	}
	return b.String(), out
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
