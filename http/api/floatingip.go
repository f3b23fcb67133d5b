package api

import "climate"

// FloatingIP is a floating IP of the inventory as the API shows it (Blazar's
// /v1/floatingips objects).
type FloatingIP struct {
	ID                string `json:"id"`
	FloatingNetworkID string `json:"floating_network_id"`
	// SubnetID is the subnet given at registration (standalone mode: no Neutron to ask);
	// null when none was.
	SubnetID   *string `json:"subnet_id"`
	Address    string  `json:"floating_ip_address"`
	Reservable bool    `json:"reservable"`
	CreatedAt  string  `json:"created_at"`
	UpdatedAt  *string `json:"updated_at"`
}

// FloatingIPRequest registers a floating IP: POST /v1/floatingips. SubnetID is Climate's
// extension.
type FloatingIPRequest struct {
	FloatingNetworkID string `json:"floating_network_id"`
	Address           string `json:"floating_ip_address"`
	SubnetID          string `json:"subnet_id,omitempty"`
}

// FloatingIPOf is a floating IP as the API shows it. Dates are written as hosts' are
// (Blazar writes the create and show answers' created_at in its other form, by accident).
func FloatingIPOf(f *climate.FloatingIP) FloatingIP {
	out := FloatingIP{
		ID: f.ID, FloatingNetworkID: f.FloatingNetworkID, Address: f.Address, Reservable: f.Reservable,
		CreatedAt: FormatCreated(f.CreatedAt), UpdatedAt: FormatUpdated(f.UpdatedAt),
	}
	if f.SubnetID != "" {
		s := f.SubnetID
		out.SubnetID = &s
	}
	return out
}
