# syntax=docker/dockerfile:1
#
# llmguard's container image: one static binary (CGO_ENABLED=0) on
# distroless "static" (CA certificates, /etc/passwd with a nonroot user,
# no shell), running as that non-root user (65532). The tiktoken
# vocabularies are embedded, so the binary starts offline.
#
#   docker build -t llmguard .                        # the proxy (last stage)
#   docker build --target mockllm -t llmguard-mockllm .   # the mock upstream
#
# Without arguments the image runs the embedded default config on all
# interfaces; give it a config with --config (docker-compose.yml mounts
# deploy/compose/llmguard.yaml). deploy/deploy_test.go checks this file.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first: a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# `llmguard version` names this (.git is not copied, so Go stamps no commit):
#   docker build --build-arg VERSION=$(git describe --tags --always) .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/llmguard ./cmd/llmguard \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mockllm ./cmd/mockllm

# The mock upstream of the quickstart and of docker-compose.yml.
FROM gcr.io/distroless/static-debian12:nonroot AS mockllm
COPY --from=build /out/mockllm /usr/local/bin/mockllm
USER nonroot:nonroot
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/mockllm", "-listen", "0.0.0.0:8081"]

# The proxy: 8080 serves callers, 9090 is the admin listener (/healthz,
# /readyz, /metrics, /admin/*).
FROM gcr.io/distroless/static-debian12:nonroot AS llmguard
COPY --from=build /out/llmguard /usr/local/bin/llmguard
USER nonroot:nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/llmguard"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--admin-listen", "0.0.0.0:9090", "--log-format", "json"]
