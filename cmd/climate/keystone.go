package main

import (
	"fmt"
	"os"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/spf13/cobra"

	"climate/keystone"
)

func newKeystoneCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keystone",
		Short: "Make Climate an OpenStack service in a Keystone",
		Example: `  . admin-openrc
  CLIMATE_KEYSTONE_PASSWORD=… climate keystone register --url https://climate.example.org:1234/v1`,
	}
	cmd.AddCommand(newKeystoneRegisterCmd())
	return cmd
}

func newKeystoneRegisterCmd() *cobra.Command {
	r := keystone.Registration{}
	cmd := &cobra.Command{
		Use:   "register",
		Short: "Register the reservation service, its endpoints and Climate's service user",
		Long: `Register Climate in Keystone as Blazar is: a service of type "reservation" (named blazar,
so that clients find it as they find Blazar), its public, internal and admin endpoints at
--url, and the service user climate serve --auth keystone authenticates as, with roles
service and admin on the service project. What exists is left as it is, so running it
again is harmless; a new service user gets the password in CLIMATE_KEYSTONE_PASSWORD
(the variable climate serve reads).

The administrator's credentials come from the environment, as openstack's do (an openrc):
OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME, OS_USER_DOMAIN_NAME and
OS_PROJECT_DOMAIN_NAME (both Default when unset).`,
		Example: `  . admin-openrc
  export CLIMATE_KEYSTONE_PASSWORD=$(openssl rand -hex 16)
  climate keystone register --url http://10.0.0.13:1234/v1
  climate keystone register --url https://climate.example.org/v1 --region RegionTwo --service-user climate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.URL == "" {
				return fmt.Errorf("--url is required: the API's URL as clients reach it, e.g. http://10.0.0.13:1234/v1")
			}
			admin, err := adminFromEnv()
			if err != nil {
				return err
			}
			r.Password = os.Getenv("CLIMATE_KEYSTONE_PASSWORD")
			steps, err := keystone.Register(cmd.Context(), admin, r)
			for _, s := range steps {
				state := "exists "
				if s.Created {
					state = "created"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", state, s.What)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nServe with:\n  CLIMATE_KEYSTONE_PASSWORD=… climate serve --auth keystone --keystone-url %s --keystone-username %s --keystone-project %s --listen …\n",
				admin.IdentityEndpoint, r.Username, r.Project)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.URL, "url", "", "the API's URL as clients reach it, ending in /v1 (required)")
	f.StringVar(&r.ServiceName, "service-name", "blazar", "the catalog service's name (type reservation)")
	f.StringVar(&r.Region, "region", "RegionOne", "the endpoints' region")
	f.StringVar(&r.Username, "service-user", "blazar", "Climate's service user")
	f.StringVar(&r.Project, "service-project", "service", "the service user's project")
	f.StringVar(&r.Domain, "domain", "default", "the domain (id) of the service user and project")
	return cmd
}

// adminFromEnv reads an administrator's credentials as an openrc sets them.
func adminFromEnv() (gophercloud.AuthOptions, error) {
	get := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	o := gophercloud.AuthOptions{IdentityEndpoint: os.Getenv("OS_AUTH_URL"), Username: os.Getenv("OS_USERNAME"),
		Password: os.Getenv("OS_PASSWORD"), DomainName: get("OS_USER_DOMAIN_NAME", "Default")}
	for name, v := range map[string]string{"OS_AUTH_URL": o.IdentityEndpoint, "OS_USERNAME": o.Username, "OS_PASSWORD": o.Password, "OS_PROJECT_NAME": os.Getenv("OS_PROJECT_NAME")} {
		if v == "" {
			return o, fmt.Errorf("%s is not set: source an administrator's openrc (OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME)", name)
		}
	}
	o.Scope = &gophercloud.AuthScope{ProjectName: os.Getenv("OS_PROJECT_NAME"), DomainName: get("OS_PROJECT_DOMAIN_NAME", "Default")}
	return o, nil
}
