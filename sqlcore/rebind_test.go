package sqlcore

import "testing"

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE a = ? AND b = ?`, `SELECT a FROM t WHERE a = $1 AND b = $2`},
		{`(created_at, id) > (?, ?) LIMIT ?`, `(created_at, id) > ($1, $2) LIMIT $3`},
		{`WHERE webhook_id = ?1 AND seq < (SELECT seq WHERE webhook_id = ?1 OFFSET ?2)`,
			`WHERE webhook_id = $1 AND seq < (SELECT seq WHERE webhook_id = $1 OFFSET $2)`},
		{`SELECT '?', "a?b", x FROM t WHERE y = ?`, `SELECT '?', "a?b", x FROM t WHERE y = $1`},
		{"SELECT x -- why?\nFROM t WHERE y = ?", "SELECT x -- why?\nFROM t WHERE y = $1"},
		{`SELECT 'unterminated ?`, `SELECT 'unterminated ?`},
		{`a = ?`, `a = $1`},
	} {
		if got := Rebind(c.in); got != c.want {
			t.Errorf("Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var r Rebinder
	if got := r.Rebind(`a = ? OR b = ?`); got != `a = $1 OR b = $2` {
		t.Errorf("Rebinder: %q", got)
	}
	if got := r.Rebind(`a = ? OR b = ?`); got != `a = $1 OR b = $2` {
		t.Errorf("Rebinder, cached: %q", got)
	}
}
