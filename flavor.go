package climate

import (
	"context"
	"time"
)

// Flavor is an instance size registered for flavor:instance reservations (Nova's flavor,
// kept by Climate in standalone mode). A reservation copies the flavor's sizes when it is
// created, so flavors are not inventory: adding or removing one does not move the
// inventory revision.
type Flavor struct {
	// ID is given by the admin (Nova flavor ids are free-form strings) or generated
	// (NewID).
	ID        string
	Name      string
	VCPUs     int
	RAM       int // MB
	Disk      int // GB, root disk
	Ephemeral int // GB
	// ExtraSpecs are Nova's flavor extra specs (trait:…, resources:…, hw:…, …); nil when
	// there are none.
	ExtraSpecs map[string]string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// FlavorStore is the part of a Tx that keeps the flavors.
type FlavorStore interface {
	// InsertFlavor writes a new flavor (f.ID set by the caller); CodeConflict, naming
	// which, when its id or its name is taken.
	InsertFlavor(ctx context.Context, f *Flavor) error
	// GetFlavor returns a flavor; CodeNotFound when there is none.
	GetFlavor(ctx context.Context, id string) (*Flavor, error)
	// ListFlavors returns every flavor in creation order, then id.
	ListFlavors(ctx context.Context) ([]Flavor, error)
	// DeleteFlavor deletes a flavor; CodeNotFound when there is none.
	DeleteFlavor(ctx context.Context, id string) error
}

// FlavorRequest registers a flavor.
type FlavorRequest struct {
	ID         string // optional: generated when empty
	Name       string
	VCPUs      int
	RAM        int // MB
	Disk       int // GB
	Ephemeral  int // GB
	ExtraSpecs map[string]string
}

// FlavorService is what the API offers on the flavors; the manager implements it.
type FlavorService interface {
	CreateFlavor(ctx context.Context, who Identity, req FlavorRequest) (*Flavor, error)
	GetFlavor(ctx context.Context, who Identity, id string) (*Flavor, error)
	ListFlavors(ctx context.Context, who Identity) ([]Flavor, error)
	DeleteFlavor(ctx context.Context, who Identity, id string) error
}

// FlavorNotFound is the error for an unknown flavor id, worded as Blazar's API words a
// missing host.
func FlavorNotFound(id string) error {
	return Errorf(CodeNotFound, "Object with {'flavor_id': '%s'} not found", id)
}

// FlavorIDTaken is the conflict of a flavor id already registered, worded as Nova's.
func FlavorIDTaken(id string) error {
	return Errorf(CodeConflict, "Flavor with ID %s already exists.", id)
}

// FlavorNameTaken is the conflict of a flavor name already registered, worded as Nova's.
func FlavorNameTaken(name string) error {
	return Errorf(CodeConflict, "Flavor with name %s already exists.", name)
}
