package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// knownVars is every CONNECTD_* variable connectd reads, the names of
// docs/configuration.md's tables (TestKnownVarsAreTheDocumentedOnes keeps
// the three — this list, the names the code reads, the documentation —
// the same).
var knownVars = []string{
	"CONNECTD_ADDR",
	"CONNECTD_ADMIN_CLAIM",
	"CONNECTD_ADMIN_ISSUER",
	"CONNECTD_ADMIN_SESSION_MAX_AGE",
	"CONNECTD_ADMIN_SUBJECTS",
	"CONNECTD_AUDIT_RETENTION",
	"CONNECTD_AUTO_MIGRATE",
	"CONNECTD_BRAND_ACCENT",
	"CONNECTD_BRAND_LOGO_URL",
	"CONNECTD_BRAND_NAME",
	"CONNECTD_CACHE_SIZE",
	"CONNECTD_CACHE_STALE_IF_ERROR",
	"CONNECTD_CLIENT_CACHE_TTL",
	"CONNECTD_CLIENT_KEY_OVERLAP",
	"CONNECTD_CONSENT_CACHE_TTL",
	"CONNECTD_CREDENTIAL_CACHE",
	"CONNECTD_CREDENTIAL_CACHE_TTL",
	"CONNECTD_DATABASE_LISTEN_URL",
	"CONNECTD_DATABASE_URL",
	"CONNECTD_DB_ACQUIRE_TIMEOUT",
	"CONNECTD_DB_MAX_CONNS",
	"CONNECTD_DB_MAX_CONN_IDLE_TIME",
	"CONNECTD_DB_MAX_CONN_LIFETIME",
	"CONNECTD_DB_MAX_WAITING",
	"CONNECTD_DB_MIN_CONNS",
	"CONNECTD_DB_QUERY_TIMEOUT",
	"CONNECTD_DEV",
	"CONNECTD_DEV_IDP",
	"CONNECTD_EGRESS_ALLOW_HOSTS",
	"CONNECTD_EGRESS_PROXY",
	"CONNECTD_EGRESS_PROXY_API",
	"CONNECTD_EGRESS_PROXY_PASSWORD",
	"CONNECTD_EGRESS_PROXY_REFRESH",
	"CONNECTD_EGRESS_PROXY_REVOKE",
	"CONNECTD_EGRESS_PROXY_TOKEN",
	"CONNECTD_EGRESS_PROXY_USER",
	"CONNECTD_EGRESS_PROXY_WEBHOOKS",
	"CONNECTD_ELICITATION_TTL",
	"CONNECTD_HEALTH_INTERVAL",
	"CONNECTD_HTTP_IDLE_TIMEOUT",
	"CONNECTD_HTTP_READ_HEADER_TIMEOUT",
	"CONNECTD_HTTP_READ_TIMEOUT",
	"CONNECTD_HTTP_WRITE_TIMEOUT",
	"CONNECTD_INTERNAL_ADDR",
	"CONNECTD_ISSUERS",
	"CONNECTD_ISSUERS_FILE",
	"CONNECTD_JOBS_RESCUE_AFTER",
	"CONNECTD_LOG_FORMAT",
	"CONNECTD_LOG_LEVEL",
	"CONNECTD_MAX_ACCOUNTS",
	"CONNECTD_MAX_WAITERS_PER_CLIENT",
	"CONNECTD_PROVIDERS_FILE",
	"CONNECTD_PROVIDER_MAX_CONCURRENCY",
	"CONNECTD_PROVIDER_TIMEOUT",
	"CONNECTD_PROXY_ANSWER_TIMEOUT",
	"CONNECTD_PROXY_MAX_IN_FLIGHT",
	"CONNECTD_PROXY_MAX_REQUEST_BYTES",
	"CONNECTD_PROXY_MAX_RESPONSE_BYTES",
	"CONNECTD_PROXY_TIMEOUT",
	"CONNECTD_PUBLIC_URL",
	"CONNECTD_RATE_API",
	"CONNECTD_RATE_API_PER_IP",
	"CONNECTD_RATE_BROWSER",
	"CONNECTD_RATE_LOGIN",
	"CONNECTD_RATE_MINT",
	"CONNECTD_RATE_MINT_USER",
	"CONNECTD_RATE_TRUSTED_PROXIES",
	"CONNECTD_RECEIPTS_RETENTION",
	"CONNECTD_REFRESH_SKEW",
	"CONNECTD_REQUEST_STATE_TTL",
	"CONNECTD_SESSION_CACHE_TTL",
	"CONNECTD_SESSION_IDLE_TIMEOUT",
	"CONNECTD_SESSION_KEYS",
	"CONNECTD_SESSION_MAX_AGE",
	"CONNECTD_SHUTDOWN_GRACE",
	"CONNECTD_TOKEN_SKEW",
	"CONNECTD_TRACING",
	"CONNECTD_VAULT_KEYS",
	"CONNECTD_VAULT_KEYS_FILE",
	"CONNECTD_WEBHOOK_BACKOFF",
	"CONNECTD_WEBHOOK_RETENTION",
	"CONNECTD_WEBHOOK_WORKERS",
}

// toolPrefixes are the names of the project's own tools (the test suite,
// the demo, scripts/pg, the browser tests), set in developers' and CI
// environments beside connectd's: not warned about.
var toolPrefixes = []string{"CONNECTD_TEST_", "CONNECTD_DEMO_", "CONNECTD_PG_", "CONNECTD_CHROMIUM", "CONNECTD_BENCH_"}

// unknownVar is a CONNECTD_* variable set in the environment that connectd
// does not read, with the known name nearest to it ("" when none is near).
type unknownVar struct{ name, nearest string }

// unknownVars returns the CONNECTD_* variables of environ (os.Environ's
// KEY=VALUE form) that connectd does not read, in their order, each with
// the nearest known name: a misspelling (CONNECTD_ADRR) is otherwise
// ignored without a word, and a mistyped listen address silently serves
// on the default.
//
// Names the configuration refers to (referenced: a providers file's or
// CONNECTD_ISSUERS' *_env fields) are the operator's own, not misspellings.
func unknownVars(environ []string, referenced map[string]bool) []unknownVar {
	var out []unknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CONNECTD_") || slices.Contains(knownVars, name) || referenced[name] ||
			slices.ContainsFunc(toolPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		out = append(out, unknownVar{name: name, nearest: nearestVar(name)})
	}
	return out
}

// nearestVar is the known name nearest to name by edit distance (case
// insensitive), if it is near enough to be a misspelling of it: at most a
// third of the name's length after the prefix, and never more than 4.
func nearestVar(name string) string {
	best, bestD := "", -1
	upper := strings.ToUpper(name)
	for _, k := range knownVars {
		if d := levenshtein.ComputeDistance(upper, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if limit := min(4, max(1, (len(name)-len("CONNECTD_"))/3)); bestD > limit {
		return ""
	}
	return best
}

// referencedVars are the variable names the configuration files name in
// their *_env fields (client_secret_env, client_id_env …): those of
// CONNECTD_ISSUERS (or its file) and of CONNECTD_PROVIDERS_FILE. A file that
// cannot be read or parsed names none here; loading the configuration
// reports it.
func referencedVars(getenv func(string) string) map[string]bool {
	out := map[string]bool{}
	docs := []string{getenv("CONNECTD_ISSUERS")}
	for _, v := range []string{"CONNECTD_ISSUERS_FILE", "CONNECTD_PROVIDERS_FILE"} {
		if path := getenv(v); path != "" {
			if b, err := os.ReadFile(path); err == nil {
				docs = append(docs, string(b))
			}
		}
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && strings.HasSuffix(k, "_env") {
					out[s] = true
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, d := range docs {
		var v any
		if json.Unmarshal([]byte(d), &v) == nil {
			walk(v)
		}
	}
	return out
}

// warnUnknownVars writes a warning line to w for each CONNECTD_* variable
// of environ connectd does not read (it starts all the same); getenv reads
// the configuration that may name some of them (referencedVars).
func warnUnknownVars(environ []string, getenv func(string) string, w io.Writer) {
	for _, u := range unknownVars(environ, referencedVars(getenv)) {
		if u.nearest != "" {
			fmt.Fprintf(w, "connectd: warning: %s is not a connectd setting and is ignored; did you mean %s? (docs/configuration.md)\n",
				u.name, u.nearest)
			continue
		}
		fmt.Fprintf(w, "connectd: warning: %s is not a connectd setting (docs/configuration.md lists them), "+
			"and no *_env field of the providers file or CONNECTD_ISSUERS names it: ignored\n", u.name)
	}
}
