package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopheros "github.com/gophercloud/gophercloud/v2/openstack"
)

// Auth is how the driver authenticates with Keystone: Climate's service user (a
// password, or an application credential) and where to find Nova in the catalog.
type Auth struct {
	URL                         string // Keystone's identity URL, e.g. http://127.0.0.1:5000/v3
	Username, Password, Project string
	UserDomain, ProjectDomain   string // names (default "Default")
	ApplicationCredentialID     string
	ApplicationCredentialSecret string
	CAFile                      string        // PEM bundle for https, instead of the system's
	Region                      string        // the catalog's region ("" for any)
	Interface                   string        // public, internal or admin (default public)
	Timeout                     time.Duration // bound of each request (default 30 s)
}

// Clients are the OpenStack APIs the driver uses.
type Clients struct {
	Compute   *gophercloud.ServiceClient
	Placement *gophercloud.ServiceClient // nil when the catalog has none
	Network   *gophercloud.ServiceClient // Neutron; nil when the catalog has none
}

// Connect authenticates and returns clients of Nova's compute API and of Placement. The
// provider re-authenticates by itself when its token expires. Errors never contain the
// secret.
func Connect(ctx context.Context, a Auth) (*Clients, error) {
	if a.URL == "" {
		return nil, errors.New("no Keystone URL")
	}
	opts := gophercloud.AuthOptions{IdentityEndpoint: a.URL, AllowReauth: true}
	if a.ApplicationCredentialID != "" {
		opts.ApplicationCredentialID, opts.ApplicationCredentialSecret = a.ApplicationCredentialID, a.ApplicationCredentialSecret
	} else {
		opts.Username, opts.Password, opts.DomainName = a.Username, a.Password, or(a.UserDomain, "Default")
		opts.Scope = &gophercloud.AuthScope{ProjectName: a.Project, DomainName: or(a.ProjectDomain, "Default")}
	}
	provider, err := gopheros.NewClient(a.URL)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if a.CAFile != "" {
		pem, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", a.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	provider.HTTPClient = http.Client{Transport: transport, Timeout: or(a.Timeout, 30*time.Second)}
	if err := gopheros.Authenticate(ctx, provider, opts); err != nil {
		return nil, fmt.Errorf("authenticating with Keystone at %s: %s", a.URL, Message(err))
	}
	eo := gophercloud.EndpointOpts{Region: a.Region, Availability: gophercloud.Availability(or(a.Interface, "public"))}
	compute, err := gopheros.NewComputeV2(provider, eo)
	if err != nil {
		return nil, fmt.Errorf("finding Nova in Keystone's catalog: %w", err)
	}
	c := &Clients{Compute: compute}
	if placement, err := gopheros.NewPlacementV1(provider, eo); err == nil {
		placement.Microversion = "1.14" // nested providers (parent_provider_uuid)
		c.Placement = placement
	}
	if network, err := gopheros.NewNetworkV2(provider, eo); err == nil {
		c.Network = network
	}
	return c, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
