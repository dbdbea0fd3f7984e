# syntax=docker/dockerfile:1
# connectd: a static binary on a minimal, non-root base.
#
#   docker build -t connectd --build-arg VERSION=$(git describe --always) .
#   docker run --read-only -p 8080:8080 --env-file connectd.env connectd serve
#
# The build stage runs on the build machine's platform and cross-compiles for
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
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/connectd ./cmd/connectd && \
    go build -trimpath -ldflags "-s -w" -o /out/connectd-demo ./cmd/connectd-demo

# distroless/static: CA certificates, tzdata, /etc/passwd and /tmp; no shell,
# no package manager, no libc (the binary needs none: CGO_ENABLED=0).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="connectd" \
      org.opencontainers.image.description="Third-party OAuth connect broker for MCP URL-mode elicitation" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/connectd /connectd
# The demo (docker compose up) runs /connectd next to it; serve never uses it.
COPY --from=build /out/connectd-demo /connectd-demo
# Numeric, so Kubernetes' runAsNonRoot can check it (65532 is distroless' nonroot).
USER 65532:65532
# 8080: public listener (CONNECTD_ADDR). 9090: operators' listener
# (CONNECTD_INTERNAL_ADDR, 127.0.0.1 by default: set it to :9090 to publish
# probes and pprof on a private network only).
EXPOSE 8080 9090
ENTRYPOINT ["/connectd"]
CMD ["serve"]
