# The kdelay image: one static binary on an empty base, run as a user that
# is not root (65532, as distroless's nonroot).
#
#   buildah build -t kdelay .    # or: docker build -t kdelay .
#   docker run --rm kdelay version
#   docker run --rm -p 9464:9464 -e KDELAY_ADMIN=:9464 kdelay serve --brokers kafka-0:9092
#
# Health: the admin listener answers GET /livez (200 while the process
# runs; it never asks Kafka) and GET /readyz (200 once kdelay forwards:
# connected to Kafka and given its partitions; 503 with the reason
# otherwise), and serves /metrics. It listens on 127.0.0.1:9464 by default,
# which inside a container only the container reaches: set admin to :9464
# (KDELAY_ADMIN=:9464, or admin: ":9464" in the config file) for a kubelet
# or a Prometheus. /debug/pprof/ answers loopback only, wherever it listens.
# There is no HEALTHCHECK: the image has no program to run one with, and
# Kubernetes probes over HTTP (deploy/kubernetes).
#
# No time zone data: kdelay writes due times in UTC and reads RFC 3339
# times with their offset, so it needs none; in the image local time (log
# timestamps, tail's clock) is UTC, and TZ has no effect.
#
# scripts/check-image builds this file with buildah and checks the image:
# CI runs it. docs/DEPLOYING.md says how to build, run and deploy it.

# Any Go image of Debian with the Go of go.mod or newer; CI, which reaches
# no container registry, builds an image of the same make (scripts/check-image).
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY . .
# CGO_ENABLED=0: a static binary, which needs nothing of the base image.
# -trimpath: no path of the build machine in it. The .git directory of the
# context (not in .dockerignore) lets go build record the commit, which
# kdelay version prints. The caches keep modules and compiled packages
# from one build to the next; go.sum checks every module downloaded.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/root/usr/local/bin/kdelay ./cmd/kdelay
# What the empty base lacks: the CAs that sign brokers' certificates (tls
# with no tls-ca-file trusts them), a /tmp (kdelay bench makes its data
# directories there), and the working directory, owned by kdelay's user:
# the embedded broker keeps its data in ./kdelay-data under it.
RUN mkdir -p /out/root/etc/ssl/certs /out/root/tmp /out/root/var/lib/kdelay && \
    cp /etc/ssl/certs/ca-certificates.crt /out/root/etc/ssl/certs/ && \
    chmod 1777 /out/root/tmp && \
    chown 65532:65532 /out/root/var/lib/kdelay

FROM scratch
# COPY --from keeps the owners and modes set above.
COPY --from=build /out/root/ /
USER 65532:65532
WORKDIR /var/lib/kdelay
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/kdelay"]
CMD ["serve"]
