package climate

import "github.com/google/uuid"

// NewID returns a UUID string, the form of every id Climate makes. It is a version 7 UUID
// (RFC 9562): a millisecond timestamp then 74 random bits. Ids made one after the other
// therefore sort near each other, so the database indexes keyed by them (leases,
// reservations, allocations, events, notifications) take each new row at their end, in a
// page already written, instead of in a random page of a large index: a lease of ten
// hosts dirtied about ten random pages of the allocations' primary key alone. Ids are
// names, not secrets (every request is authorized), so the creation time they show,
// which the API shows anyway, gives nothing away.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}
