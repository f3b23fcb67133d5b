package climate

import (
	"context"
	"time"
)

// FloatingIP is an external IP address registered for reservation (Blazar's
// virtual:floatingip inventory). In standalone mode (no Neutron) nothing checks the network
// or subnet: they are what the operator says they are.
type FloatingIP struct {
	ID                string
	FloatingNetworkID string
	// SubnetID is the subnet the address belongs to (Climate's extension in standalone
	// mode: Blazar looks it up in Neutron); empty when not given.
	SubnetID string
	// Address is in canonical form (netip.Addr.String()).
	Address    string
	Reservable bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// FloatingIPStore is the part of a Tx that keeps the floating IP inventory.
type FloatingIPStore interface {
	// InsertFloatingIP writes a new floating IP (f.ID set by the caller); CodeConflict when
	// its id, or its address on its network, is taken.
	InsertFloatingIP(ctx context.Context, f *FloatingIP) error
	// GetFloatingIP returns a floating IP; CodeNotFound when there is none.
	GetFloatingIP(ctx context.Context, id string) (*FloatingIP, error)
	// ListFloatingIPs returns every floating IP in creation order, then id.
	ListFloatingIPs(ctx context.Context) ([]FloatingIP, error)
	// DeleteFloatingIP deletes a floating IP; CodeNotFound when there is none.
	DeleteFloatingIP(ctx context.Context, id string) error
}

// FloatingIPRequest registers a floating IP.
type FloatingIPRequest struct {
	FloatingNetworkID string
	Address           string
	SubnetID          string // optional
}

// FloatingIPService is what the API offers on the floating IP inventory; the manager
// implements it.
type FloatingIPService interface {
	CreateFloatingIP(ctx context.Context, who Identity, req FloatingIPRequest) (*FloatingIP, error)
	GetFloatingIP(ctx context.Context, who Identity, id string) (*FloatingIP, error)
	ListFloatingIPs(ctx context.Context, who Identity) ([]FloatingIP, error)
	DeleteFloatingIP(ctx context.Context, who Identity, id string) error
}

// FloatingIPNotFound is the error for an unknown floating IP id, worded as Blazar's API
// words a missing host.
func FloatingIPNotFound(id string) error {
	return Errorf(CodeNotFound, "Object with {'floatingip_id': '%s'} not found", id)
}
