package postgres

import (
	"fmt"
	"strings"
	"testing"
)

// The lock keys computed in Go are the server's: every length up to three 12-byte
// blocks and past, multi-byte characters, and the keys of real locks.
func TestHashTextExtendedMatchesPostgreSQL(t *testing.T) {
	s := open(t, TestDSN(t))
	var in []string
	for n := range 40 {
		in = append(in, strings.Repeat("x", n), strings.Repeat("é", n))
	}
	in = append(in, "é", "天気", "public/00000000-0000-0000-0000-000000000001", "climate_test/h1@20454")
	for i := range 50 {
		in = append(in, fmt.Sprintf("schema_%d/%08x-host@%d", i, i*7919, 19000+i))
	}
	rows, err := s.pool.Query(ctx, `SELECT hashtextextended(v, 0) FROM unnest($1::text[]) WITH ORDINALITY AS t(v, i) ORDER BY i`, in)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var want int64
		if err := rows.Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := hashTextExtended(in[i]); got != want {
			t.Errorf("hashTextExtended(%q) = %d; PostgreSQL says %d", in[i], got, want)
		}
	}
	if err := rows.Err(); err != nil || i != len(in) {
		t.Fatalf("%d of %d hashes read: %v", i, len(in), err)
	}
}

// resourceLocks takes the locks earlier versions took in SQL (so both kinds of replica
// exclude each other during an upgrade), in the same order: with a window of days and
// without, a resource named twice locked once.
func TestResourceLocksAreTheSQLOnes(t *testing.T) {
	s := open(t, TestDSN(t))
	const earlier = `SELECT k, x FROM (SELECT DISTINCT k, x FROM (
		SELECT hashtextextended($2 || r, 0) AS k, $3::bigint IS NULL AS x FROM unnest($1::text[]) AS r
		UNION ALL
		SELECT hashtextextended($2 || r || '@' || d, 0), true
		FROM unnest($1::text[]) AS r, generate_series($3::bigint, $4::bigint) AS d
	) AS keys ORDER BY k, x) AS locks`
	ids := []string{"h1", "00000000-0000-0000-0000-000000000007", "h2", "h1"}
	first, last := int64(20454), int64(20456)
	for _, c := range []struct {
		what        string
		first, last *int64
	}{{"three days", &first, &last}, {"unbounded", nil, nil}} {
		keys, alone := resourceLocks("climate_x", ids, c.first, c.last)
		rows, err := s.pool.Query(ctx, earlier, ids, "climate_x/", c.first, c.last)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for rows.Next() {
			var k int64
			var x bool
			if err := rows.Scan(&k, &x); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprint(k, x))
		}
		rows.Close()
		var got []string
		for i := range keys {
			got = append(got, fmt.Sprint(keys[i], alone[i]))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: locks %v; the SQL of earlier versions takes %v", c.what, got, want)
		}
		if n := 3 * (1 + 3); c.first != nil && len(got) != n {
			t.Errorf("%s: %d locks; want %d (3 resources, each with 3 days)", c.what, len(got), n)
		}
	}
}
