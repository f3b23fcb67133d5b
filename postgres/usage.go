package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"climate"
	"climate/sqlcore"
)

// ListUsage is sqlcore's.

// PutUsage inserts or replaces usage records, in multi-row statements held back to go
// with the transaction's next statement or its COMMIT (pipe.go).
func (t *tx) PutUsage(ctx context.Context, rs []climate.UsageRecord) error {
	if err := t.Writable(); err != nil {
		return err
	}
	for len(rs) > 0 {
		n := min(len(rs), rowsPerStatement)
		args := make([]any, 0, 18*n)
		for i := range rs[:n] {
			args = dialect.AppendUsageArgs(args, &rs[i])
		}
		t.p.hold(nil, sqlcore.Rebind(`INSERT INTO usage_records (`+sqlcore.UsageColumns+`) VALUES `+sqlcore.ValuesRows(18, n)+`
			ON CONFLICT (lease_id, reservation_id, allocation_id) DO UPDATE SET lease_name = excluded.lease_name, start_at = excluded.start_at,
				end_at = excluded.end_at, held_from = excluded.held_from, held_until = excluded.held_until, rate = excluded.rate,
				cost = excluded.cost, closed = excluded.closed, updated_at = excluded.updated_at`), args...)
		rs = rs[n:]
	}
	return nil
}

// ChargeProject adds d to the project's totals. With totals it folds the project's
// deltas and d into its project_charges row, which stays locked until the transaction
// ends, and returns the row; without, it appends d to project_charge_deltas, which
// locks nothing (doc.go, "Concurrent writers").
func (t *tx) ChargeProject(ctx context.Context, project string, d climate.ProjectCharge, totals bool) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	if err := t.Writable(); err != nil {
		return c, err
	}
	if !totals { // held back, as PutUsage
		t.p.hold(nil, `INSERT INTO project_charge_deltas (project_id, `+sqlcore.ChargeColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			sqlcore.ChargeArgs(project, d)...)
		return c, nil
	}
	err := t.q.QueryRow(ctx, `WITH folded AS (
			DELETE FROM project_charge_deltas WHERE project_id = $1 RETURNING `+sqlcore.ChargeColumns+`)
		INSERT INTO project_charges (project_id, `+sqlcore.ChargeColumns+`)
			SELECT $1, $2 + coalesce(sum(charged), 0), $3 + coalesce(sum(open_leases), 0), $4 + coalesce(sum(open_hosts), 0),
				$5 + coalesce(sum(open_vcpus), 0), $6 + coalesce(sum(open_floatingips), 0) FROM folded
		ON CONFLICT (project_id) DO UPDATE SET `+addCharges+`
		RETURNING `+sqlcore.ChargeColumns, sqlcore.ChargeArgs(project, d)...).
		Scan(sqlcore.ChargeDest(&c)...)
	return c, dbError(err)
}

// addCharges adds an upsert's excluded row to the existing one.
const addCharges = `charged = project_charges.charged + excluded.charged,
	open_leases = project_charges.open_leases + excluded.open_leases,
	open_hosts = project_charges.open_hosts + excluded.open_hosts,
	open_vcpus = project_charges.open_vcpus + excluded.open_vcpus,
	open_floatingips = project_charges.open_floatingips + excluded.open_floatingips`

// ProjectCharged returns the project's totals: its row plus its deltas.
func (t *tx) ProjectCharged(ctx context.Context, project string) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	err := t.q.QueryRow(ctx, `SELECT coalesce(sum(charged), 0), coalesce(sum(open_leases), 0), coalesce(sum(open_hosts), 0),
			coalesce(sum(open_vcpus), 0), coalesce(sum(open_floatingips), 0)
		FROM (SELECT `+sqlcore.ChargeColumns+` FROM project_charges WHERE project_id = $1
			UNION ALL SELECT `+sqlcore.ChargeColumns+` FROM project_charge_deltas WHERE project_id = $1) AS parts`, project).
		Scan(sqlcore.ChargeDest(&c)...)
	return c, dbError(err)
}

// FoldProjectCharges folds every project's deltas into its project_charges row, so that
// totals stay one row and a few deltas to read; the leader runs it now and then. It
// returns how many deltas it folded.
func (s *Store) FoldProjectCharges(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, func(t *tx) error {
		return dbError(t.q.QueryRow(ctx, `WITH folded AS (
				DELETE FROM project_charge_deltas RETURNING project_id, `+sqlcore.ChargeColumns+`),
			upserted AS (
				INSERT INTO project_charges (project_id, `+sqlcore.ChargeColumns+`)
					SELECT project_id, sum(charged), sum(open_leases), sum(open_hosts), sum(open_vcpus), sum(open_floatingips)
					FROM folded GROUP BY project_id
				ON CONFLICT (project_id) DO UPDATE SET `+addCharges+`)
			SELECT count(*) FROM folded`).Scan(&n))
	})
	return n, err
}

// lockProject takes the project's transaction-scoped advisory lock alone. A write
// transaction that reads a project's limits holds it shared (GetProjectLimits), and one
// that sets them holds it alone, so limits never change under a charge that read them.
func (t *tx) lockProject(ctx context.Context, project string) error {
	_, err := t.q.Exec(ctx, `SELECT pg_advisory_xact_lock(`+projectKey+`)`, t.schema, project)
	return dbError(err)
}

// projectKey is the advisory lock key of project $2 in schema $1.
const projectKey = `hashtextextended($1 || '/project/' || $2, 0)`

// GetProjectLimits returns the project's limits, if it has any. A write transaction
// takes the project's lock, shared, in the same round trip (lockProject).
func (t *tx) GetProjectLimits(ctx context.Context, project string) (*climate.ProjectLimits, bool, error) {
	if !t.Write {
		return t.Tx.GetProjectLimits(ctx, project)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared(`+projectKey+`)`, t.schema, project)
	b.Queue(rebinder.Rebind(sqlcore.ProjectLimitsQuery), project)
	return dialect.ScanProjectLimits(project, lockedRow{t.q.SendBatch(ctx, b)})
}

// lockedRow is the row of a batch's second statement, read once its first (a lock) ran.
type lockedRow struct{ br pgx.BatchResults }

func (r lockedRow) Scan(dest ...any) error {
	_, err := r.br.Exec()
	if err == nil {
		err = r.br.QueryRow().Scan(dest...)
	}
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// PutProjectLimits sets the project's limits, holding the project's lock alone.
func (t *tx) PutProjectLimits(ctx context.Context, l *climate.ProjectLimits) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := t.lockProject(ctx, l.ProjectID); err != nil {
		return err
	}
	return t.PutLimits(ctx, l)
}
