// Package sshconfig answers ssh_config lookups the way OpenSSH does: the
// first value obtained for a key wins, identity files accumulate. The dial
// (remote) and the inventory (a user or an address left to ssh_config)
// read the same file the same way.
package sshconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// Config is a decoded ssh_config; the zero value answers nothing.
type Config struct {
	cfg *ssh_config.Config
	// Path is the file it was read from; "" when none was.
	Path string
}

// Load reads path: "" is ~/.ssh/config (absent is no config, as ssh
// has it), "none" is no config, anything else must exist.
func Load(path string) (*Config, error) {
	if strings.EqualFold(path, "none") {
		return &Config{}, nil
	}
	explicit := path != ""
	if !explicit {
		home, err := os.UserHomeDir()
		if err != nil {
			return &Config{}, nil
		}
		path = filepath.Join(home, ".ssh", "config")
	}
	path = ExpandHome(path)
	f, err := os.Open(path)
	if err != nil {
		if !explicit && os.IsNotExist(err) {
			return &Config{}, nil
		}
		return nil, fmt.Errorf("ssh_config %s: %w", path, err)
	}
	defer f.Close()
	cfg, err := ssh_config.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("ssh_config %s: %w", path, err)
	}
	return &Config{cfg: cfg, Path: path}, nil
}

// Get is the first value of key for alias, trimmed; "" when unset.
func (c *Config) Get(alias, key string) string {
	if c == nil || c.cfg == nil {
		return ""
	}
	v, _ := c.cfg.Get(alias, key)
	return strings.TrimSpace(v)
}

// GetAll is every value of key for alias (IdentityFile accumulates).
func (c *Config) GetAll(alias, key string) []string {
	if c == nil || c.cfg == nil {
		return nil
	}
	v, _ := c.cfg.GetAll(alias, key)
	return v
}

// ExpandHome expands a leading ~ to the user's home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}
