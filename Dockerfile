# Multi-stage build: a static connectd binary on a minimal, non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/connectd ./cmd/connectd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/connectd /connectd
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/connectd"]
CMD ["serve"]
