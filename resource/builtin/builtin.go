// Package builtin lists the resource types Climate ships, for the manager's default and
// for the wire format, which shows each reservation with its type's keys.
package builtin

import (
	"climate"
	"climate/resource"
	"climate/resource/flavor"
	"climate/resource/floatingip"
	"climate/resource/host"
	"climate/resource/instance"
)

// Types returns every built-in resource type; flavor:instance finds flavors with
// flavors (nil where only Fields is used).
func Types(flavors flavor.Lookup) resource.Types {
	return resource.Types{host.Type{}, instance.Type{}, flavor.Type{Flavors: flavors}, floatingip.Type{}}
}

var wire = Types(nil)

// Fields returns the wire keys of r's type (nil for a type Climate does not ship).
func Fields(r *climate.Reservation) map[string]any { return wire.Fields(r) }

// Hosts returns the hosts r holds whole, by its built-in type.
func Hosts(r *climate.Reservation) []string { return wire.Hosts(r) }
