package main

import (
	"errors"
	"os"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/vault"
)

// loadVault reads the vault and provider variables (see docs/vault.md and
// docs/providers.md). Messages name the variable, never a key.
//
// With secrets false the providers file is read for its names and form
// only (needs.providers): c.Vault.Providers then holds no secret, and no
// catalog can be built of it (provider.Config.NoSecrets).
func (c *Config) loadVault(e *env, secrets bool) {
	keys := strings.TrimSpace(e.getenv("CONNECTD_VAULT_KEYS"))
	keysFile := e.str("CONNECTD_VAULT_KEYS_FILE", "")
	switch {
	case keys != "" && keysFile != "":
		e.fail("CONNECTD_VAULT_KEYS_FILE", "set CONNECTD_VAULT_KEYS or CONNECTD_VAULT_KEYS_FILE, not both")
	case keysFile != "":
		b, err := os.ReadFile(keysFile)
		if err != nil {
			e.fail("CONNECTD_VAULT_KEYS_FILE", "cannot be read: %s", describeFileError(err))
			break
		}
		c.Vault.Keyring = parseKeyring(e, "CONNECTD_VAULT_KEYS_FILE", string(b))
		clear(b)
	case keys != "":
		c.Vault.Keyring = parseKeyring(e, "CONNECTD_VAULT_KEYS", keys)
	}

	c.Vault.Providers = &provider.Config{Dev: c.Dev}
	if path := e.str("CONNECTD_PROVIDERS_FILE", ""); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			e.fail("CONNECTD_PROVIDERS_FILE", "cannot be read: %s", describeFileError(err))
		} else if pc, err := provider.ParseConfig(data, provider.ParseOptions{Dev: c.Dev, Getenv: e.getenv,
			NoSecrets: !secrets}); err != nil {
			e.fail("CONNECTD_PROVIDERS_FILE", "%s", err)
		} else {
			c.Vault.Providers = pc
		}
	}
	c.Vault.RefreshSkew = e.duration("CONNECTD_REFRESH_SKEW", 2*time.Minute, time.Second, time.Hour)
	c.Vault.ProviderTimeout = e.duration("CONNECTD_PROVIDER_TIMEOUT", 30*time.Second, time.Second, 5*time.Minute)
	c.Vault.ProviderConcurrency = int(e.int32("CONNECTD_PROVIDER_MAX_CONCURRENCY", 16, 1, 10_000))
	c.Vault.MaxAccounts = int(e.int32("CONNECTD_MAX_ACCOUNTS", vault.DefaultMaxAccounts, 1, 1000))
	c.Vault.ProxyMaxRequestBytes = int64(e.int32("CONNECTD_PROXY_MAX_REQUEST_BYTES", 10<<20, 1<<10, 1<<30))
	c.Vault.ProxyMaxResponseBytes = int64(e.int32("CONNECTD_PROXY_MAX_RESPONSE_BYTES", 100<<20, 1<<10, 1<<30))
	c.Vault.ProxyTimeout = e.duration("CONNECTD_PROXY_TIMEOUT", 5*time.Minute, time.Second, time.Hour)
	c.Vault.ProxyAnswerTimeout = e.duration("CONNECTD_PROXY_ANSWER_TIMEOUT", proxy.DefaultHeaderTimeout, time.Second, 5*time.Minute)
	c.Vault.ProxyMaxInFlight = int(e.int32("CONNECTD_PROXY_MAX_IN_FLIGHT", proxy.DefaultMaxInFlight, 1, 100_000))
}

func parseKeyring(e *env, name, spec string) *keyring.Keyring {
	k, err := keyring.Parse(spec)
	if err != nil {
		e.fail(name, "%s", strings.TrimPrefix(err.Error(), keyring.ErrKeyring.Error()+": "))
		return nil
	}
	return k
}

// describeFileError says why a file could not be read without repeating its
// path (the variable's value).
func describeFileError(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such file"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	default:
		return "read error"
	}
}
