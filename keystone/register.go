package keystone

import (
	"context"
	"fmt"
	"net/url"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
)

// Registration is what makes Climate an OpenStack service: a catalog entry of type
// "reservation" (as Blazar's) with public, internal and admin endpoints, and a service
// user with roles service and admin on the service project (to validate tokens, take
// trusts and delete them).
type Registration struct {
	ServiceName string // "blazar", so that clients looking for Blazar's name find it
	Region      string // "RegionOne"
	URL         string // the API's URL, e.g. https://climate.example.org:1234/v1
	// The service user and its project (created when missing; the user's password is
	// set only when the user is created).
	Username, Password, Project, Domain string
}

// Step is one thing Register found or did, for the operator to read.
type Step struct {
	What    string // "service blazar (reservation)"
	Created bool   // false: it was already there
}

// Register creates what is missing of r in the Keystone that admin (an administrator's
// credentials) authenticates against, and leaves what is there: running it twice is
// harmless. It returns the steps in order.
func Register(ctx context.Context, admin gophercloud.AuthOptions, r Registration) ([]Step, error) {
	if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the API URL %q: want http(s)://HOST[:PORT]/v1", r.URL)
	}
	provider, err := openstack.AuthenticatedClient(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("authenticating the administrator at %s: %v", admin.IdentityEndpoint, responseText(err))
	}
	id, err := openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	if err != nil {
		return nil, err
	}
	var steps []Step
	step := func(created bool, format string, args ...any) {
		steps = append(steps, Step{What: fmt.Sprintf(format, args...), Created: created})
	}

	svc, created, err := findOrCreate(ctx,
		func() ([]services.Service, error) {
			page, err := services.List(id, services.ListOpts{Name: r.ServiceName, ServiceType: "reservation"}).AllPages(ctx)
			if err != nil {
				return nil, err
			}
			return services.ExtractServices(page)
		},
		func() (*services.Service, error) {
			return services.Create(ctx, id, services.CreateOpts{Name: r.ServiceName, Type: "reservation", Description: "Climate reservations"}).Extract()
		})
	if err != nil {
		return steps, fmt.Errorf("service %s: %v", r.ServiceName, responseText(err))
	}
	step(created, "service %s (type reservation, id %s)", r.ServiceName, svc.ID)

	page, err := endpoints.List(id, endpoints.ListOpts{ServiceID: svc.ID}).AllPages(ctx)
	if err != nil {
		return steps, fmt.Errorf("listing the endpoints: %v", responseText(err))
	}
	existing, err := endpoints.ExtractEndpoints(page)
	if err != nil {
		return steps, err
	}
	for _, iface := range []gophercloud.Availability{gophercloud.AvailabilityPublic, gophercloud.AvailabilityInternal, gophercloud.AvailabilityAdmin} {
		found := false
		for _, e := range existing {
			found = found || (e.Availability == iface && e.Region == r.Region && e.URL == r.URL)
		}
		if !found {
			if _, err := endpoints.Create(ctx, id, endpoints.CreateOpts{Availability: iface, Region: r.Region, URL: r.URL, ServiceID: svc.ID}).Extract(); err != nil {
				return steps, fmt.Errorf("%s endpoint: %v", iface, responseText(err))
			}
		}
		step(!found, "%s endpoint %s in %s", iface, r.URL, r.Region)
	}

	domain := r.Domain
	if domain == "" {
		domain = "default"
	}
	project, created, err := findOrCreate(ctx,
		func() ([]projects.Project, error) {
			page, err := projects.List(id, projects.ListOpts{Name: r.Project, DomainID: domain}).AllPages(ctx)
			if err != nil {
				return nil, err
			}
			return projects.ExtractProjects(page)
		},
		func() (*projects.Project, error) {
			return projects.Create(ctx, id, projects.CreateOpts{Name: r.Project, DomainID: domain}).Extract()
		})
	if err != nil {
		return steps, fmt.Errorf("project %s: %v", r.Project, responseText(err))
	}
	step(created, "project %s (id %s)", r.Project, project.ID)

	user, created, err := findOrCreate(ctx,
		func() ([]users.User, error) {
			page, err := users.List(id, users.ListOpts{Name: r.Username, DomainID: domain}).AllPages(ctx)
			if err != nil {
				return nil, err
			}
			return users.ExtractUsers(page)
		},
		func() (*users.User, error) {
			if r.Password == "" {
				return nil, fmt.Errorf("no password given for the new service user %s", r.Username)
			}
			return users.Create(ctx, id, users.CreateOpts{Name: r.Username, Password: r.Password, DomainID: domain, DefaultProjectID: project.ID}).Extract()
		})
	if err != nil {
		return steps, fmt.Errorf("user %s: %v", r.Username, responseText(err))
	}
	step(created, "user %s (id %s)", r.Username, user.ID)

	for _, name := range []string{"service", "admin"} {
		role, created, err := findOrCreate(ctx,
			func() ([]roles.Role, error) {
				page, err := roles.List(id, roles.ListOpts{Name: name}).AllPages(ctx)
				if err != nil {
					return nil, err
				}
				return roles.ExtractRoles(page)
			},
			func() (*roles.Role, error) { return roles.Create(ctx, id, roles.CreateOpts{Name: name}).Extract() })
		if err != nil {
			return steps, fmt.Errorf("role %s: %v", name, responseText(err))
		}
		if created {
			step(true, "role %s", name)
		}
		// Assigning is idempotent in Keystone (204 either way).
		if err := roles.Assign(ctx, id, role.ID, roles.AssignOpts{UserID: user.ID, ProjectID: project.ID}).ExtractErr(); err != nil {
			return steps, fmt.Errorf("role %s for %s on %s: %v", name, r.Username, r.Project, responseText(err))
		}
		step(false, "role %s of %s on project %s", name, r.Username, r.Project)
	}
	return steps, nil
}

// findOrCreate returns the one thing find finds, or what create makes when it finds
// none; more than one is an error (names are ambiguous).
func findOrCreate[T any](ctx context.Context, find func() ([]T, error), create func() (*T, error)) (*T, bool, error) {
	found, err := find()
	if err != nil {
		return nil, false, err
	}
	switch len(found) {
	case 0:
		made, err := create()
		return made, err == nil, err
	case 1:
		return &found[0], false, nil
	}
	return nil, false, fmt.Errorf("%d of them share the name: remove the extra ones or choose another name", len(found))
}
