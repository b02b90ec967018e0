# flatline's container image: `docker build -t flatline .` (see deploy/README.md).
#
# The binary is built by `make build`, the target a developer uses, with cgo
# off so that it is static and runs on an image without a libc.

FROM golang:1.26 AS build
WORKDIR /src
# Module downloads get their own layer, rebuilt only when go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git is not in the build context (.dockerignore), so `git describe` cannot
# name the version: pass it, e.g. --build-arg VERSION=$(git describe --always --dirty).
ARG VERSION=dev
RUN CGO_ENABLED=0 GOFLAGS=-trimpath make build VERSION="$VERSION"

# distroless/static: CA certificates (for Redis and Kafka over TLS), tzdata
# and /etc/passwd with the nonroot user, and nothing else: no shell, no libc.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/flatline /usr/local/bin/flatline
# The documented defaults, so the image starts with FLATLINE_* variables
# alone; mount the real file over it (the Helm chart does, from a ConfigMap).
COPY configs/flatline.yaml /etc/flatline/flatline.yaml
# Numeric, so that Kubernetes' runAsNonRoot can check it without /etc/passwd.
USER 65532:65532
# http.addr: /metrics, /healthz, /readyz, /status. flatline.yaml's default
# listens on loopback only; in a container set http.addr (or
# FLATLINE_HTTP_ADDR) to 0.0.0.0:9464.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/flatline", "serve"]
CMD ["--config", "/etc/flatline/flatline.yaml"]
