#!/bin/sh
# Builds static binaries and FROM scratch images for every llmworker
# service, plus a nats-server image compiled from the nats-server Go module
# (a dependency of llmworker, so it comes from the module cache / proxy).
#
#   deploy/build-images.sh              # images llmworker/<name>:dev
#   TAG=v0.1.0 REGISTRY=ghcr.io/me deploy/build-images.sh
#   NO_DOCKER=1 deploy/build-images.sh  # binaries only, in deploy/.build
#
# The binaries are stripped and report VERSION (default: TAG) in
# `llmworker version` and in $SRV.INFO (a TAG that is not SemVer, such as
# dev, reads 0.0.0-dev there).
#
# Needs: go (1.26), docker (only to build the images; nothing is pulled).
set -eu

cd "$(dirname "$0")/.."
TAG=${TAG:-dev}
VERSION=${VERSION:-$TAG}
REGISTRY=${REGISTRY:-llmworker}
OUT=deploy/.build
GOARCH=${GOARCH:-$(go env GOARCH)}
mkdir -p "$OUT"

# One go build of every binary: the packages they share compile once and
# the binaries link side by side (go build -o DIR/ names each after its
# package: nats-server/v2 gives nats-server).
echo "go build -> $OUT/{llmworker,ingest,turn,toolexec,hookbridge,gateway,nats-server}"
CGO_ENABLED=0 GOOS=linux GOARCH="$GOARCH" go build -trimpath \
	-ldflags="-s -w -X github.com/llmworker/llmworker/internal/leaf/version.Version=$VERSION" -o "$OUT/" \
	./cmd/llmworker ./cmd/ingest ./cmd/turn ./cmd/toolexec ./cmd/hookbridge ./cmd/gateway \
	github.com/nats-io/nats-server/v2

CA=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -f "$CA" ]; then
	echo "no CA bundle at $CA (set CA_CERTS=...)" >&2
	exit 1
fi
cp "$CA" "$OUT/ca-certificates.crt"

if [ -n "${NO_DOCKER:-}" ]; then
	exit 0
fi
# The images build side by side; each waits for its build and fails the
# script when it failed.
pids=
for bin in llmworker ingest turn toolexec hookbridge gateway nats-server; do
	img="$REGISTRY/$bin:$TAG"
	echo "docker build $img"
	docker build -q -f deploy/Dockerfile --build-arg BIN="$bin" -t "$img" "$OUT" &
	pids="$pids $!"
done
for pid in $pids; do
	wait "$pid"
done
echo "images: $REGISTRY/{llmworker,ingest,turn,toolexec,hookbridge,gateway,nats-server}:$TAG"
