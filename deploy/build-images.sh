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

build() { # name package
	echo "go build $2 -> $OUT/$1"
	CGO_ENABLED=0 GOOS=linux GOARCH="$GOARCH" go build -trimpath \
		-ldflags="-s -w -X github.com/llmworker/llmworker/internal/version.Version=$VERSION" -o "$OUT/$1" "$2"
}
build llmworker ./cmd/llmworker
build ingest ./cmd/ingest
build turn ./cmd/turn
build toolexec ./cmd/toolexec
build hookbridge ./cmd/hookbridge
build gateway ./cmd/gateway
build nats-server github.com/nats-io/nats-server/v2

CA=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -f "$CA" ]; then
	echo "no CA bundle at $CA (set CA_CERTS=...)" >&2
	exit 1
fi
cp "$CA" "$OUT/ca-certificates.crt"

if [ -n "${NO_DOCKER:-}" ]; then
	exit 0
fi
for bin in llmworker ingest turn toolexec hookbridge gateway nats-server; do
	img="$REGISTRY/$bin:$TAG"
	echo "docker build $img"
	docker build -q -f deploy/Dockerfile --build-arg BIN="$bin" -t "$img" "$OUT"
done
echo "images: $REGISTRY/{llmworker,ingest,turn,toolexec,hookbridge,gateway,nats-server}:$TAG"
