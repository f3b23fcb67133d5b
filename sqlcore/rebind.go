package sqlcore

import (
	"strconv"
	"strings"
	"sync"
)

// Rebind numbers a query's '?' placeholders as PostgreSQL's $1, $2, …; a '?' followed by
// digits (SQLite's ?NNN) becomes $NNN. A '?' inside a quoted string, a quoted
// identifier or a comment is left alone.
func Rebind(query string) string {
	if strings.IndexByte(query, '?') < 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) && query[j] != c {
				j++
			}
			b.WriteString(query[i:min(j+1, len(query))])
			i = j
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			b.WriteString(query[i : i+j])
			i += j - 1
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			b.WriteByte('$')
			if j > i+1 {
				b.WriteString(query[i+1 : j])
				i = j - 1
			} else {
				n++
				b.WriteString(strconv.Itoa(n))
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Rebinder caches Rebind's result per query text: queries are a fixed set of texts, so
// each is rebound once.
type Rebinder struct{ m sync.Map }

// Rebind returns Rebind(query), from the cache when it was seen before.
func (r *Rebinder) Rebind(query string) string {
	if q, ok := r.m.Load(query); ok {
		return q.(string)
	}
	q := Rebind(query)
	r.m.Store(query, q)
	return q
}
