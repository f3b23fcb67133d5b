package sqlite

import (
	"context"
	"database/sql"

	"climate"
	"climate/sqlcore"
)

// ListUsage is sqlcore's.

// PutUsage inserts or replaces usage records, many rows a statement (each statement
// costs a prepare).
func (t *tx) PutUsage(ctx context.Context, rs []climate.UsageRecord) error {
	if err := t.Writable(); err != nil {
		return err
	}
	const perStatement = 50 // 18 parameters a row, well under SQLite's 32,766
	for len(rs) > 0 {
		n := min(len(rs), perStatement)
		args := make([]any, 0, n*18)
		for i := range rs[:n] {
			args = dialect.AppendUsageArgs(args, &rs[i])
		}
		values, bound := sharedValues(18, n, args)
		if _, err := t.q.ExecContext(ctx, `INSERT OR REPLACE INTO usage_records (`+sqlcore.UsageColumns+`) VALUES `+values, bound...); err != nil {
			return internal(err)
		}
		rs = rs[n:]
	}
	return nil
}

// ChargeProject adds to the project's charge and open leases and returns the new totals.
// One writer: the totals are always exact, so they are always returned.
func (t *tx) ChargeProject(ctx context.Context, project string, d climate.ProjectCharge, _ bool) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	if err := t.Writable(); err != nil {
		return c, err
	}
	err := t.q.QueryRowContext(ctx, `INSERT INTO project_charges (project_id, `+sqlcore.ChargeColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id) DO UPDATE SET charged = charged + excluded.charged, open_leases = open_leases + excluded.open_leases,
			open_hosts = open_hosts + excluded.open_hosts, open_vcpus = open_vcpus + excluded.open_vcpus,
			open_floatingips = open_floatingips + excluded.open_floatingips
		RETURNING `+sqlcore.ChargeColumns, sqlcore.ChargeArgs(project, d)...).
		Scan(sqlcore.ChargeDest(&c)...)
	return c, internal(err)
}

// ProjectCharged returns the project's charge and open leases.
func (t *tx) ProjectCharged(ctx context.Context, project string) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	err := t.q.QueryRowContext(ctx, `SELECT `+sqlcore.ChargeColumns+` FROM project_charges WHERE project_id = ?`, project).
		Scan(sqlcore.ChargeDest(&c)...)
	if err == sql.ErrNoRows {
		return c, nil
	}
	return c, internal(err)
}

// GetProjectLimits is sqlcore's.

// PutProjectLimits sets the project's limits.
func (t *tx) PutProjectLimits(ctx context.Context, l *climate.ProjectLimits) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.PutLimits(ctx, l)
}
