package postgres

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
)

// resourceLocks returns the advisory locks lockResources takes for a write transaction's
// re-check of resources ids, in the order it takes them (key order): each resource's
// key, alone when there is no window of days (first nil), shared otherwise, and then a
// key of each (resource, day) from first to last, alone. The keys are PostgreSQL's
// hashtextextended of "<schema>/<resource>" and "<schema>/<resource>@<day>", as earlier
// versions computed them in SQL, so replicas of both kinds exclude each other. Computing
// them here spares PostgreSQL planning that statement on every creation (0.5 ms of its
// CPU on a 2-core VM; the statement that takes them now plans in 0.06 ms).
func resourceLocks(schema string, ids []string, first, last *int64) (keys []int64, alone []bool) {
	type lock struct {
		key   int64
		alone bool
	}
	var locks []lock
	prefix := schema + "/"
	for _, id := range ids {
		locks = append(locks, lock{hashTextExtended(prefix + id), first == nil})
		if first != nil {
			for d := *first; d <= *last; d++ {
				locks = append(locks, lock{hashTextExtended(prefix + id + "@" + strconv.FormatInt(d, 10)), true})
			}
		}
	}
	slices.SortFunc(locks, func(a, b lock) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(btoi(a.alone), btoi(b.alone)) // shared first, as ORDER BY k, x
	})
	locks = slices.Compact(locks)
	keys, alone = make([]int64, len(locks)), make([]bool, len(locks))
	for i, l := range locks {
		keys[i], alone[i] = l.key, l.alone
	}
	return keys, alone
}

// hashTextExtended is PostgreSQL's hashtextextended(s, 0) for a deterministic collation:
// hash_bytes_extended (src/common/hashfn.c, Bob Jenkins' lookup3) over s's bytes, as
// little-endian words, with seed 0. TestHashTextExtendedMatchesPostgreSQL checks it
// against the server.
func hashTextExtended(s string) int64 {
	k := []byte(s)
	a := 0x9e3779b9 + uint32(len(k)) + 3923095
	b, c := a, a
	for ; len(k) >= 12; k = k[12:] {
		a += binary.LittleEndian.Uint32(k[0:])
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		a, b, c = mix(a, b, c)
	}
	// The last 11 bytes at most, zero-padded: the same sums as lookup3's byte switch,
	// whose third word starts one byte up (c's lowest byte holds the length, added above).
	var tail [12]byte
	copy(tail[:], k)
	a += binary.LittleEndian.Uint32(tail[0:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:]) << 8
	a, b, c = final(a, b, c)
	return int64(uint64(b)<<32 | uint64(c))
}

// mix is lookup3's mix: two cycles of three rounds, each with its own rotations.
func mix(a, b, c uint32) (uint32, uint32, uint32) {
	for _, r := range [2][3]int{{4, 6, 8}, {16, 19, 4}} {
		a -= c
		a ^= bits.RotateLeft32(c, r[0])
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, r[1])
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, r[2])
		b += a
	}
	return a, b, c
}

// final is lookup3's final mix.
func final(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return a, b, c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
