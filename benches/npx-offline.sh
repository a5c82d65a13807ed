#!/usr/bin/env bash
# benches/npx-offline.sh [BINARY]
#
# How long `npx -y filewatch-mcp@VERSION --version` takes to start from npm's cache when the
# registry cannot be reached (docs/install.md, "Offline"): the npm packages (release/npm-pack,
# with BINARY, default target/release/filewatch-mcp, as the linux-x64 package) are served by a
# throwaway registry on 127.0.0.1, one `npx` run fills an empty cache, the registry stops, and
# the same command is timed with nothing listening on its port, then once more with
# --prefer-offline. npm's own settings (fetch-retries and their timeouts) are left as they are.
# Linux x64 only (the one platform package it packs).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$repo/target/release/filewatch-mcp}")
version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/npx-offline.XXXXXX")
server=
cleanup() {
  [[ -z $server ]] || kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/bins/x86_64-unknown-linux-musl"
cp "$bin" "$tmp/bins/x86_64-unknown-linux-musl/filewatch-mcp"
"$repo/release/npm-pack" "$tmp/npm" --bins "$tmp/bins" --no-build >/dev/null

# A registry that serves the packed tarballs: a packument per package, then the tarballs.
cat >"$tmp/registry.js" <<'JS'
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { execFileSync } = require('node:child_process');
const dir = process.argv[2];
const packages = {};
const server = http.createServer((req, res) => {
  const url = decodeURIComponent(req.url.split('?')[0]).replace(/^\//, '');
  const base = `http://127.0.0.1:${server.address().port}/`;
  if (url.startsWith('-/')) {
    res.end(fs.readFileSync(path.join(dir, url.slice(2))));
  } else if (packages[url]) {
    const { manifest, file, integrity } = packages[url];
    const version = { ...manifest, dist: { tarball: `${base}-/${file}`, integrity } };
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ name: url, 'dist-tags': { latest: manifest.version }, versions: { [manifest.version]: version } }));
  } else {
    res.statusCode = 404;
    res.end('{}');
  }
});
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.tgz'))) {
  const bytes = fs.readFileSync(path.join(dir, file));
  const manifest = JSON.parse(execFileSync('tar', ['xzOf', path.join(dir, file), 'package/package.json']));
  const integrity = `sha512-${crypto.createHash('sha512').update(bytes).digest('base64')}`;
  packages[manifest.name] = { manifest, file, integrity };
}
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
JS
node "$tmp/registry.js" "$tmp/npm" >"$tmp/port" &
server=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
port=$(cat "$tmp/port")

export npm_config_cache=$tmp/cache npm_config_registry=http://127.0.0.1:$port/ npm_config_update_notifier=false
cd "$tmp"
echo "npx-offline: filling the cache: npx -y filewatch-mcp@$version --version"
npx -y "filewatch-mcp@$version" --version
kill "$server"
wait "$server" 2>/dev/null || true
server=
ms() { date +%s%3N; }
start=$(ms)
printed=$(npx -y "filewatch-mcp@$version" --version 2>"$tmp/err" || true)
echo "npx-offline: registry unreachable: npx -y filewatch-mcp@$version --version printed \"$printed\" after $(($(ms) - start)) ms"
start=$(ms)
printed=$(npx -y --prefer-offline "filewatch-mcp@$version" --version 2>>"$tmp/err" || true)
echo "npx-offline: registry unreachable: npx -y --prefer-offline … printed \"$printed\" after $(($(ms) - start)) ms"
