package main

// VaultConfig configures credential encryption and the provider catalog.
// Filled by loadVault.
type VaultConfig struct{}

// loadVault reads the vault and provider variables (see docs/configuration.md).
func (c *Config) loadVault(e *env) {}
