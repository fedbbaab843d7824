#!/usr/bin/env bash
# Make sure a Docker engine answers. On Debian as root, install docker.io (and debootstrap, which builds the sandbox
# image without a registry) and start dockerd in the background when none runs. apt-get waits (bounded) for another
# package job's lock (scripts/apt_get.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[docker] %s\n' "$*"; }

if docker info >/dev/null 2>&1; then
  log "engine answers: $(docker info --format '{{.ServerVersion}}')"
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "[docker] no Docker engine answers and this is not root: start one (or run as root), or set SKIP_DOCKER=1" >&2
  exit 1
fi
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  log "installing docker.io and debootstrap with apt-get"
  source scripts/apt_get.sh
  apt_get update -qq
  apt_get install -y -qq docker.io debootstrap >/dev/null
fi
log "starting dockerd"
mkdir -p /var/log
setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "engine answers: $(docker info --format '{{.ServerVersion}}')"
    exit 0
  fi
  sleep 1
done
echo "[docker] dockerd did not answer within 60 s; see /var/log/dockerd.log" >&2
tail -n 20 /var/log/dockerd.log >&2 || true
exit 1
