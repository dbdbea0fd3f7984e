# connectd — see README.md. Every target works on a fresh machine: Postgres is a
# private cluster started by scripts/pg unless CONNECTD_TEST_DATABASE_URL is set.
SHELL := /bin/bash
GO    ?= go
PG    := scripts/pg run --

.PHONY: all build generate check-generated fmt-check vet ts test demo pg clean bench faults dist

all: build

build:
	$(GO) build -o bin/connectd ./cmd/connectd

## generate: regenerate templ components (*_templ.go are committed).
generate:
	$(GO) tool templ generate -path web/templates

## check-generated: fail when committed *_templ.go differ from a fresh generation.
check-generated:
	@scripts/check-generated

## ts: the TypeScript client and example MCP server (ts/): Node.js 20+ and npm
## (scripts/ensure-node), npm ci, the build (tsc; a stale dist is never tested),
## the client's unit tests, and the staleness check of the openapi.ts generated
## from docs/openapi.yaml. e2e/typescript_test.go (go test) runs the rest
## against a real connectd.
ts:
	@scripts/ensure-node
	cd ts && npm ci --no-audit --no-fund --loglevel=error
	cd ts && npm run --silent build
	@scripts/check-generated-ts
	cd ts && node --test client/build-test/unit/

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## test: vet, gofmt, templ staleness, the TypeScript build and unit tests (ts), then every test with -race against a real
## Postgres, the real-browser tests included (scripts/ensure-chromium installs
## Debian's chromium when missing, or fails saying how to get it). Fuzz targets
## run their seed corpora here; fuzz further with go test -fuzz (docs/security.md).
test: vet fmt-check check-generated ts
	@chromium="$$(scripts/ensure-chromium)" && \
	CONNECTD_CHROMIUM="$$chromium" $(PG) $(GO) test -race -count=1 ./...

## demo: connectd (dev mode, http://127.0.0.1:8080), an identity provider, the Demo Files OAuth
## provider and the example MCP server, on a private Postgres; prints a walkthrough. Ctrl-C stops all.
## DEMO_FLAGS go to connectd-demo (e.g. DEMO_FLAGS="-port 8180"); see go run ./cmd/connectd-demo -h.
## The demo's database is kept in .cache/demo-pg between runs, its keys and Demo Files' tokens in .cache/demo
## (so a restart keeps connections and webhook secrets); make clean deletes both.
demo:
	@mkdir -p .cache
	CONNECTD_PG_DIR=$(CURDIR)/.cache/demo-pg $(PG) scripts/demo $(DEMO_FLAGS)

## dist: the release artifacts in dist/, built offline: connectd for linux amd64 and arm64, the Python client's
## wheel (pip install FILE), the TypeScript client's npm tarball (npm install FILE), the container image when a
## Docker engine is here, and SHA256SUMS (scripts/dist; VERSION, DIST_ARCHES, DIST_OUT).
dist: ts
	@scripts/dist

## pg: a private PostgreSQL for other tools; prints its URLs and runs until Ctrl-C.
pg:
	@scripts/pg serve

clean:
	scripts/pg remove .cache/demo-pg
	rm -rf bin .cache dist

## bench: benchmark harness with in-run baselines (REPLICAS=N); writes docs/performance.md.
## BENCH_FLAGS=-profile=DIR keeps pprof profiles of replica 0; see go run ./cmd/connectd-bench -h.
bench: build
	$(PG) $(GO) run ./cmd/connectd-bench -connectd bin/connectd $(BENCH_FLAGS)

## faults: the fault study of issue 22 (not in make test; about 6 minutes): two replicas on the private Postgres
## through a restart, an outage, a frozen database, an exhausted pool, late and garbage provider answers and a
## replica killed mid-refresh; prints the table and writes it into docs/faults.md. FAULTS_FLAGS go to
## connectd-faults (e.g. FAULTS_FLAGS="-only a,c -logs /tmp/faults"); see go run ./cmd/connectd-faults -h.
faults: build
	$(PG) $(GO) run ./cmd/connectd-faults -connectd bin/connectd $(FAULTS_FLAGS)
