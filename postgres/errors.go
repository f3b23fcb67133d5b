package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"climate"
)

// SQLSTATE codes the store tells apart.
const (
	sqlUniqueViolation      = "23505"
	sqlExclusionViolation   = "23P01"
	sqlSerializationFailure = "40001"
	sqlDeadlockDetected     = "40P01"
	sqlBadCharacter         = "22021" // text PostgreSQL cannot store: a NUL character
)

// sqlState returns err's SQLSTATE, or "" when it does not come from the server.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// dbError classifies a database error: an overlapping allocation (the exclusion
// constraint allocations_no_double_booking, SQLSTATE 23P01, usually at COMMIT) or a lost race wraps climate.ErrConflictRetry so the
// manager re-plans; a uniqueness violation is a conflict; text with a NUL character is
// invalid input; anything else is internal, logged and never shown.
func dbError(err error) error {
	if err == nil {
		return nil
	}
	var ce *climate.Error
	if errors.As(err, &ce) {
		return err
	}
	switch sqlState(err) {
	case sqlExclusionViolation, sqlSerializationFailure, sqlDeadlockDetected:
		return fmt.Errorf("postgres: %w: %w", climate.ErrConflictRetry, err)
	case sqlUniqueViolation:
		return &climate.Error{Code: climate.CodeConflict, Message: "Object already exists", Err: err}
	case sqlBadCharacter:
		// Bad input, not our fault: SQLite stores NUL characters, PostgreSQL's text cannot.
		return &climate.Error{Code: climate.CodeInvalid, Message: "Text must not contain NUL characters", Err: err}
	}
	return &climate.Error{Code: climate.CodeInternal, Err: err}
}
