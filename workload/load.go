package workload

import (
	"context"

	"climate"
)

// loadBatch is how many leases one write transaction inserts.
const loadBatch = 2000

// Load writes a book into a store: hosts first, then leases in batches. progress, when not
// nil, is called after each batch with the number of leases written so far.
func Load(ctx context.Context, st climate.Store, b *Book, progress func(done, total int)) error {
	err := st.Update(ctx, func(tx climate.Tx) error {
		for i := range b.Hosts {
			h := b.Hosts[i] // InsertHost may fill fields; keep the book unchanged
			if err := tx.InsertHost(ctx, &h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for from := 0; from < len(b.Leases); from += loadBatch {
		to := min(from+loadBatch, len(b.Leases))
		err := st.Update(ctx, func(tx climate.Tx) error {
			for i := from; i < to; i++ {
				if err := tx.InsertLease(ctx, &b.Leases[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if progress != nil {
			progress(to, len(b.Leases))
		}
	}
	return nil
}
