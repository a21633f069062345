#!/usr/bin/env bash
# Installs what building and testing Switchboard needs on Debian or Ubuntu:
# the cgo headers fyne needs, Xvfb and a tray host for the GUI tests.
# Idempotent: it installs only what is missing, and apt-get update runs
# only when something is.
set -euo pipefail

pkgs=(gcc libc6-dev pkg-config libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev
  libxinerama-dev libxi-dev libxxf86vm-dev libwayland-dev libxkbcommon-dev
  xvfb xauth dbus imagemagick xdotool x11-utils
  haskell-status-notifier-item-utils haskell-gtk-sni-tray-utils)

if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is not installed; install Go 1.26 or newer from https://go.dev/dl/" >&2
  exit 1
fi
gov=$(go env GOVERSION | sed 's/^go//')
case "$gov" in
  1.2[6-9]*|1.[3-9][0-9]*|[2-9].*) ;;
  *) echo "deps: Go $gov is too old; Switchboard needs Go 1.26 or newer" >&2; exit 1 ;;
esac

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
else
  echo "deps: not a Debian-like system; install the equivalents of: ${pkgs[*]}" >&2
  exit 0
fi

if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      echo "deps: need root to install: ${missing[*]}" >&2; exit 1
    fi
  fi
  # Wait for another apt to finish rather than failing on its lock.
  for _ in $(seq 1 120); do
    if ! fuser /var/lib/dpkg/lock-frontend >/dev/null 2>&1; then break; fi
    sleep 1
  done
  echo "deps: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v npx >/dev/null 2>&1; then
  echo "deps: warning: node/npx not found; the integration tests with the real MCP servers will be skipped" >&2
fi
echo "deps: ok"
