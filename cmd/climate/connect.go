package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v2"

	"climate/http/client"
)

// clientOptions are the connection and output settings of every client command. Each
// setting comes from its flag, else its CLIMATE_… variable, else the config file, else
// the default.
type clientOptions struct {
	url, token, config string
	out                outputOptions
}

// clientConfig is the config file: $XDG_CONFIG_HOME/climate/config.yaml (or
// ~/.config/climate/config.yaml), or the file named by --config / CLIMATE_CONFIG.
type clientConfig struct {
	URL   string `json:"url" yaml:"url"`
	Token string `json:"token" yaml:"token"`
}

const clientHelp = `The server comes from --url, CLIMATE_URL or the config file (default
http://127.0.0.1:1234); a server started with --auth tokens also needs --token or
CLIMATE_TOKEN. The config file ($XDG_CONFIG_HOME/climate/config.yaml, or --config) holds
both as YAML:

  url: https://climate.example.org:1234
  token: s3cret`

// addClientFlags adds the connection and output flags to a command group.
func addClientFlags(cmd *cobra.Command) *clientOptions {
	o := &clientOptions{}
	f := cmd.PersistentFlags()
	f.StringVar(&o.url, "url", client.DefaultURL, "Climate server URL")
	f.StringVar(&o.token, "token", "", "token to send as X-Auth-Token (servers run with --auth tokens)")
	f.StringVar(&o.config, "config", "", "config file with url and token (default $XDG_CONFIG_HOME/climate/config.yaml)")
	o.out.addFlags(cmd)
	f.VisitAll(func(fl *pflag.Flag) { _ = f.SetAnnotation(fl.Name, envFlag, []string{"true"}) })
	return o
}

// client returns a client for the configured server, after checking the output flags so
// that a bad -o fails before anything is sent.
func (o *clientOptions) client(cmd *cobra.Command) (*client.Client, error) {
	if err := o.out.check(); err != nil {
		return nil, err
	}
	url, token := o.url, o.token
	cfg, path, err := loadClientConfig(o.config)
	if err != nil {
		return nil, err
	}
	if !cmd.Flags().Changed("url") && cfg.URL != "" {
		url = cfg.URL
	}
	if !cmd.Flags().Changed("token") && cfg.Token != "" {
		token = cfg.Token
		if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "climate: warning: %s holds a token and can be read by others (chmod 600 it)\n", path)
		}
	}
	c, err := client.New(url, token)
	if err != nil {
		return nil, fmt.Errorf("--url: %v", err)
	}
	return c, nil
}

// completionClient is client for shell completion, which cobra runs without the root's
// PersistentPreRunE: the environment is applied here.
func (o *clientOptions) completionClient(cmd *cobra.Command) (*client.Client, error) {
	if err := bindEnv(cmd.Flags()); err != nil {
		return nil, err
	}
	return o.client(cmd)
}

// loadClientConfig reads the config file; a missing default file is no config.
func loadClientConfig(path string) (clientConfig, string, error) {
	var cfg clientConfig
	explicit := path != ""
	if !explicit {
		path = defaultConfigPath()
		if path == "" {
			return cfg, "", nil
		}
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, path, nil
	}
	if err != nil {
		return cfg, path, fmt.Errorf("config file: %v", err)
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return cfg, path, configError(path, err)
	}
	return cfg, path, nil
}

// unknownKey matches yaml's report of a key the config does not have.
var unknownKey = regexp.MustCompile(`line (\d+): field (\S+) not found in type`)

// configError says what is wrong with the config file at path: the line and the unknown
// key, or yaml's own words for a file that is not YAML.
func configError(path string, err error) error {
	if m := unknownKey.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("config file %s, line %s: unknown key %q (the keys are url and token)", path, m[1], m[2])
	}
	return fmt.Errorf("config file %s: %s (want YAML with url: and token:)", path, strings.TrimPrefix(err.Error(), "yaml: "))
}

func defaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "climate", "config.yaml")
}
