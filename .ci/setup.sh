#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine with Node 20: pnpm, a WebGPU-capable Vulkan driver
# (Mesa >= 25 lavapipe from bookworm-backports; Dawn refuses bookworm's own Mesa 22.3), Chromium for the
# playground's browser test, then the workspace's dependencies and build. Quiet unless something fails.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
quiet() { "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "setup: failed: $*" >&2; exit 1; }; }
sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"

mesa_ok() {
  v=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
  [ -n "$v" ] && dpkg --compare-versions "$v" ge 25 && dpkg -s libvulkan1 >/dev/null 2>&1
}
if command -v apt-get >/dev/null && ! mesa_ok; then
  echo "setup: installing Mesa's Vulkan drivers from bookworm-backports"
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    mirror=$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | head -1 | tr -d ' ' || true)
    mirror=${mirror%/}; [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" | $sudo tee /etc/apt/sources.list.d/rusty-backports.sources >/dev/null
  fi
  quiet $sudo apt-get update -qq
  quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1
fi

# Debian's Chromium for the playground's browser test (WebGPU on SwiftShader, driven by puppeteer-core)
if command -v apt-get >/dev/null && ! command -v chromium >/dev/null; then
  echo "setup: installing Chromium (the playground's browser test)"
  quiet $sudo apt-get update -qq
  quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi

want_pnpm=$(node -p "require('./package.json').packageManager.split('@')[1]")
if [ "$(pnpm -v 2>/dev/null || true)" != "$want_pnpm" ]; then
  echo "setup: installing pnpm $want_pnpm"
  quiet npm install -g --no-fund --no-audit "pnpm@$want_pnpm"
fi
quiet pnpm install --frozen-lockfile --reporter=silent
quiet pnpm -s build
echo "setup: ready (node $(node -v), pnpm $(pnpm -v), mesa $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo none), chromium $(dpkg-query -W -f='${Version}' chromium 2>/dev/null || echo none))"
