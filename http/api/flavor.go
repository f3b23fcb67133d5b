package api

import (
	"maps"

	"climate"
)

// EphemeralKey is the key of a flavor's ephemeral disk, as Nova writes it (Nova's
// OS-FLV-EXT-DATA extension).
const EphemeralKey = "OS-FLV-EXT-DATA:ephemeral"

// Flavor is a flavor as the API shows it (Climate's /v1/flavors objects, shaped as Nova's
// flavors, plus the dates Climate's other objects carry).
type Flavor struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	VCPUs int    `json:"vcpus"`
	RAM   int    `json:"ram"`  // MB
	Disk  int    `json:"disk"` // GB
	// Ephemeral is the ephemeral disk in GB.
	Ephemeral int `json:"OS-FLV-EXT-DATA:ephemeral"`
	// ExtraSpecs is always an object: {} when there are none.
	ExtraSpecs map[string]string `json:"extra_specs"`
	CreatedAt  string            `json:"created_at"`
	UpdatedAt  *string           `json:"updated_at"`
}

// FlavorRequest registers a flavor: POST /v1/flavors. ID is optional (generated when
// empty); the server also accepts "ephemeral" for OS-FLV-EXT-DATA:ephemeral.
type FlavorRequest struct {
	ID         string            `json:"id,omitempty"`
	Name       string            `json:"name"`
	VCPUs      int               `json:"vcpus"`
	RAM        int               `json:"ram"`
	Disk       int               `json:"disk"`
	Ephemeral  int               `json:"OS-FLV-EXT-DATA:ephemeral,omitempty"`
	ExtraSpecs map[string]string `json:"extra_specs,omitempty"`
}

// FlavorOf is a flavor as the API shows it. Dates are written as hosts' are.
func FlavorOf(f *climate.Flavor) Flavor {
	specs := maps.Clone(f.ExtraSpecs)
	if specs == nil {
		specs = map[string]string{}
	}
	return Flavor{
		ID: f.ID, Name: f.Name, VCPUs: f.VCPUs, RAM: f.RAM, Disk: f.Disk, Ephemeral: f.Ephemeral, ExtraSpecs: specs,
		CreatedAt: FormatCreated(f.CreatedAt), UpdatedAt: FormatUpdated(f.UpdatedAt),
	}
}
