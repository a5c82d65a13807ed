#!/usr/bin/env bash
# The VS Code scenarios (tests/vscode, issue 34): filewatch-mcp watch beside a real VS Code —
# code-server 4.139.1 in headless Chromium — driven as a person types.
#
#   .ci/vscode.sh target/debug/filewatch-mcp
#
# Installs what is missing: with apt, Chromium and what code-server's native modules build with
# (build-essential pkg-config libsecret-1-dev libkrb5-dev); Node 24, which code-server needs, from
# the npm package node@24 into ~/.cache/filewatch-mcp (the system's Node stays as it is); and
# tests/vscode's packages (npm ci, run with Node 24: code-server builds its modules for it).
# Measured from nothing on a loaded 2-core machine: apt 36 s, Node 24 11 s, npm ci 3 min 45 s;
# then the 14 tests, about 10 min (docs/development.md#measurements).
set -euo pipefail
bin=$(realpath "${1:?usage: .ci/vscode.sh path/to/filewatch-mcp}")
cd "$(dirname "$0")/.."
started=$SECONDS
say() { echo ".ci/vscode.sh: $* ($((SECONDS - started)) s in)"; }

node_version=24.21.0
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v g++ >/dev/null && command -v make >/dev/null || missing+=(build-essential)
command -v pkg-config >/dev/null || missing+=(pkg-config)
[[ -e /usr/include/libsecret-1/libsecret/secret.h ]] || missing+=(libsecret-1-dev)
[[ -e /usr/include/krb5.h ]] || missing+=(libkrb5-dev)
if ((${#missing[@]})); then
  say "installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

node24_dir=${XDG_CACHE_HOME:-$HOME/.cache}/filewatch-mcp/node-$node_version
node24=$node24_dir/node_modules/node/bin/node
if ! [[ -x $node24 ]] || [[ $("$node24" --version) != "v$node_version" ]]; then
  say "installing Node $node_version (npm package node@$node_version) into $node24_dir"
  mkdir -p "$node24_dir"
  npm install --prefix "$node24_dir" --no-audit --no-fund --no-save --loglevel=error "node@$node_version"
fi
export PATH=$(dirname "$node24"):$PATH

# npm run with Node 24 (code-server's postinstall checks the version npm runs on, and builds
# its native modules for it). They build against the headers of a local Node (node-gyp cannot
# download any here): N-API modules, so the system's headers do.
if [[ -z ${npm_config_nodedir:-} && -e /usr/include/node/node_api.h ]]; then
  export npm_config_nodedir=/usr
fi
say "npm ci in tests/vscode (code-server 4.139.1, playwright-core)"
(cd tests/vscode && npm ci --no-audit --no-fund --loglevel=error)

say "the scenarios, with $bin"
(cd tests/vscode && FILEWATCH_BIN=$bin npm test)
say "done"
