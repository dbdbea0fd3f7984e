# syntax=docker/dockerfile:1
# connectd: a static binary on a minimal, non-root base.
#
#   docker build -t connectd --build-arg VERSION=$(git describe --always) .
#   docker run --read-only -p 8080:8080 --env-file connectd.env connectd serve
#
# Two images come from this file. The last stage, connectd (the default
# target), is the production image: the connectd binary alone, without the
# demo, its development identity provider or its fakes. The demo target adds
# connectd-demo beside it and runs that (docker compose up builds it):
#
#   docker build --target demo -t connectd:demo .
#
# The build stages run on the build machine's platform and cross-compile for
# the target (docker buildx build --platform linux/amd64,linux/arm64 …).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first, so source changes do not re-download them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/connectd ./cmd/connectd

# The demo program, built only for the demo target (BuildKit skips a stage
# no target needs). A stage's ARGs end with it: declared again.
FROM build AS build-demo
ARG TARGETOS=linux
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/connectd-demo ./cmd/connectd-demo

# demo: connectd-demo runs /connectd (the same binary as the production
# image's, next to it) beside the identity provider, Demo Files and the
# example MCP server; dev mode throughout, never a deployment. Its listeners
# bind every interface of the container (published ports reach them there)
# while every URL still says 127.0.0.1; it needs CONNECTD_DATABASE_URL and a
# writable /tmp.
FROM gcr.io/distroless/static-debian12:nonroot AS demo
ARG VERSION=dev
LABEL org.opencontainers.image.title="connectd-demo" \
      org.opencontainers.image.description="connectd's dev-mode demo: connectd with an identity provider, an OAuth provider and an MCP server (not for production)" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/connectd /connectd
COPY --from=build-demo /out/connectd-demo /connectd-demo
USER 65532:65532
EXPOSE 8080 8081 8082 8083 8084 9090
ENTRYPOINT ["/connectd-demo"]
CMD ["-bind", "0.0.0.0", "-internal-addr", "0.0.0.0:9090", "-state-dir", "/tmp/demo"]

# connectd, the production image (the default target: keep it last).
# distroless/static: CA certificates, tzdata, /etc/passwd and /tmp; no shell,
# no package manager, no libc (the binary needs none: CGO_ENABLED=0).
FROM gcr.io/distroless/static-debian12:nonroot AS connectd
ARG VERSION=dev
LABEL org.opencontainers.image.title="connectd" \
      org.opencontainers.image.description="Third-party OAuth connect broker for MCP URL-mode elicitation" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/connectd /connectd
# Numeric, so Kubernetes' runAsNonRoot can check it (65532 is distroless' nonroot).
USER 65532:65532
# 8080: public listener (CONNECTD_ADDR). 9090: operators' listener
# (CONNECTD_INTERNAL_ADDR, 127.0.0.1 by default: set it to :9090 to publish
# probes and pprof on a private network only).
EXPOSE 8080 9090
ENTRYPOINT ["/connectd"]
CMD ["serve"]
