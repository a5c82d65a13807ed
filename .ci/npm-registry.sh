#!/usr/bin/env bash
# The npm packages the way a user gets them (issue 23), offline, against a local registry:
#   - verdaccio (.ci/verdaccio, pinned) on 127.0.0.1 with no uplinks; release/npm-publish
#     publishes the tarballs in NPM_DIR (from release/npm-pack) to it;
#   - then, as a user with a fresh HOME (cold npm cache) and a PATH with node but no cargo and no
#     filewatch-mcp:
#     1. `npx -y filewatch-mcp@VERSION --version` (timed, cold cache);
#     2. the stop, measured (.ci/sigint-stop.mjs, Claude Code's sequence): through the wrapper
#        alone, through `npx -p … -c 'exec filewatch-mcp …'`, and through plain `npx -y` (where
#        npm's `sh -c` is a dash that holds SIGINT back, Claude Code's SIGTERM stops it);
#     3. `claude mcp add filewatch -- npx -y filewatch-mcp@VERSION --root .`, `claude mcp list`
#        (cold and warm cache, timed) -> ✔ Connected; `claude -p hi --debug`: connected, tools,
#        the stop; the same for the `-c 'exec …'` registration, whose stop must be on SIGINT;
#     4. the plugin from this repository's marketplace, with no binary anywhere: its launcher
#        gets the binary through npx -> ✔ Connected, a clean stop on SIGINT; without Node it
#        serves its stand-in (✔ Connected, one line in the MCP log) and, Node back, the real
#        server starts in the next session (no remembered failure);
#     5. the launcher alone: npx failing, npx too slow -> the stand-in, with the reason.
# Usage: .ci/npm-registry.sh NPM_DIR   (the real Claude Code CLI is installed from npm, pinned)
set -euo pipefail
started=$SECONDS
repo=$(cd "$(dirname "$0")/.." && pwd)
npm_dir=$(cd "${1:?usage: .ci/npm-registry.sh NPM_DIR}" && pwd)
CLAUDE_CODE_VERSION=2.1.332
SIGINT_MAX_MS=${FILEWATCH_SIGINT_MAX_MS:-80}
version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml")

say() { printf 'npm-registry.sh: %s\n' "$*"; }
failures=()
pass() { printf '  ok    %s\n' "$1"; }
fail() {
  failures+=("$1")
  printf '  FAIL  %s\n' "$1"
}
ms_now() { date +%s%3N; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/filewatch-registry.XXXXXX")
registry_pid=
cleanup() {
  [[ -z $registry_pid ]] || kill "$registry_pid" 2>/dev/null || true
  if [[ ${FILEWATCH_KEEP_TMP:-} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- tools, with the ordinary npm config -------------------------------------------------------
say "installing verdaccio (.ci/verdaccio) and @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION with npm"
(cd "$repo/.ci/verdaccio" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
npm install --prefix "$tmp/cli" --no-audit --no-fund --no-progress --loglevel=error \
  "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >/dev/null
claude=$tmp/cli/node_modules/.bin/claude

# ---- the registry ------------------------------------------------------------------------------
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
registry=http://127.0.0.1:$port/
mkdir -p "$tmp/registry"
cat >"$tmp/registry/config.yaml" <<YAML
storage: $tmp/registry/storage
auth:
  htpasswd:
    file: $tmp/registry/htpasswd
uplinks: {}
packages:
  '**':
    access: \$all
    publish: \$all
log: { type: stdout, format: pretty, level: error }
# The Linux package holds a 49 MB binary: 8 MB packed, about 11 MB as npm sends it (base64),
# over verdaccio's default limit of 10 MB (publish failed with 413 Payload Too Large).
max_body_size: 200mb
YAML
"$repo/.ci/verdaccio/node_modules/.bin/verdaccio" --config "$tmp/registry/config.yaml" \
  --listen "127.0.0.1:$port" >"$tmp/registry/log" 2>&1 &
registry_pid=$!
deadline=$((SECONDS + 60))
until node -e 'fetch(process.argv[1] + "-/ping").then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$registry"; do
  if ((SECONDS > deadline)) || ! kill -0 "$registry_pid" 2>/dev/null; then
    cat "$tmp/registry/log" >&2
    say "verdaccio did not start on 127.0.0.1:$port" >&2
    exit 1
  fi
  sleep 0.2
done
say "verdaccio on $registry (no uplinks)"
NPM_TOKEN=x "$repo/release/npm-publish" "$npm_dir" --registry "$registry"

# ---- the user ------------------------------------------------------------------------------------
# A fresh HOME whose npmrc names the local registry (and so a cold npm cache), a PATH with node,
# npm and npx and the system's /usr/bin:/bin, and nothing else of this machine's environment.
home=$tmp/home
proj=$tmp/proj
mkdir -p "$home" "$proj/src" "$tmp/user-bin"
printf 'def greet(name):\n    return f"hello {name}"\n' >"$proj/src/hello.py"
printf 'registry=%s\nupdate-notifier=false\nfund=false\naudit=false\n' "$registry" >"$home/.npmrc"
for t in node npm npx; do ln -s "$(command -v "$t")" "$tmp/user-bin/$t"; done
user_path=$tmp/user-bin:/usr/bin:/bin
as_user() {
  env -i HOME="$home" XDG_CONFIG_HOME="$home/.config" PATH="$user_path" LANG=C.UTF-8 \
    TMPDIR="${TMPDIR:-/tmp}" DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "$@"
}
cd "$proj"
for t in cargo rustc filewatch-mcp; do
  if where=$(as_user sh -c "command -v $t"); then
    say "the user's PATH ($user_path) has $t ($where): this test needs a PATH without it" >&2
    exit 1
  fi
done
pass "the user's PATH has node ($(as_user node --version)) and no cargo, rustc or filewatch-mcp"

# ---- 1. npx --version, cold cache ----------------------------------------------------------------
t0=$(ms_now)
out=$(as_user npx -y "filewatch-mcp@$version" --version 2>"$tmp/npx.err") || true
cold_npx_ms=$(($(ms_now) - t0))
if [[ $out == "filewatch-mcp $version" ]]; then
  pass "npx -y filewatch-mcp@$version --version: '$out' in $cold_npx_ms ms (cold npm cache)"
else
  fail "npx -y filewatch-mcp@$version --version printed '$out' ($(head -c 400 "$tmp/npx.err"))"
fi
bin=$(as_user env FILEWATCH_MCP_PRINT_BINARY=1 npx -y "filewatch-mcp@$version" 2>/dev/null || true)
if [[ $bin == "$home/.npm/_npx/"*"/node_modules/@filewatch-mcp/linux-x64/bin/filewatch-mcp" ]]; then
  pass "the binary npx runs is the one of @filewatch-mcp/linux-x64 in npm's cache"
else
  fail "the binary npx runs is '$bin', not @filewatch-mcp/linux-x64's in $home/.npm/_npx"
fi
wrapper=$(dirname "$(dirname "$(dirname "$(dirname "$bin")")")")/filewatch-mcp/bin/filewatch-mcp.js
# A platform without a binary (Node told it runs on ia32), and optional dependencies turned off.
printf 'Object.defineProperty(process, "arch", { value: "ia32" });\n' >"$tmp/ia32.js"
rc=0
out=$(as_user node -r "$tmp/ia32.js" "$wrapper" --version 2>&1) || rc=$?
if ((rc == 1)) && [[ $out == "filewatch-mcp: no prebuilt binary for this platform (linux-ia32); there are binaries for linux-x64, linux-arm64, darwin-x64, darwin-arm64, win32-x64."* ]]; then
  pass "wrapper on a platform without a binary: exit 1, '${out:0:120}…'"
else
  fail "wrapper on a platform without a binary: exit $rc, '$out'"
fi
mkdir -p "$tmp/omit"
as_user npm install --prefix "$tmp/omit" --omit=optional --loglevel=error "filewatch-mcp@$version" >/dev/null 2>&1 || true
rc=0
out=$(as_user "$tmp/omit/node_modules/.bin/filewatch-mcp" --version 2>&1) || rc=$?
if ((rc == 1)) && [[ $out == *"@filewatch-mcp/linux-x64@$version, which is not installed"*"--omit=optional"* ]]; then
  pass "npm install --omit=optional, then filewatch-mcp: exit 1, '${out:0:150}…'"
else
  fail "npm install --omit=optional, then filewatch-mcp: exit $rc, '$out'"
fi

# ---- 2. the stop, measured -----------------------------------------------------------------------
# Does this /bin/sh run `sh -c 'cmd args'` by exec (bash, zsh) or as a child (dash)? npx runs
# the package's command that way, and a child shell holds SIGINT back until its child exits.
sh_execs=$(node -e 'const c = require("child_process").spawnSync("sh", ["-c", `'\''${process.execPath}'\'' -p process.ppid`]);
  console.log(String(c.stdout).trim() === String(process.pid) ? 1 : 0)')
# Five stops of CMD; what must hold in every one: no SIGKILL needed, nothing left behind, nothing
# on stderr. WANT=SIGINT: the SIGINT alone stopped it (before the SIGTERM 100 ms later) at least
# once, in LIMIT ms or less the fastest time: the slower runs are this loaded machine's (other
# engineers build on its 2 cores), and the times of all are printed. LIMIT 0: the SIGTERM comes
# only 2 s after the SIGINT, so this asks whether the SIGINT reaches the server at all.
stop() { # label, want ("SIGINT" or "SIGINT|SIGTERM"), limit ms, command...
  local label=$1 want=$2 limit=$3 r bad='' times=() bys=() sigint=0 grace=100
  shift 3
  [[ $want == SIGINT && $limit == 0 ]] && grace=2000
  for _ in 1 2 3 4 5; do
    r=$(as_user env SIGTERM_AFTER_MS="$grace" node "$repo/.ci/sigint-stop.mjs" "$home" "$@")
    local ms by left stderr
    ms=$(node -p 'JSON.parse(process.argv[1]).ms' "$r")
    by=$(node -p 'JSON.parse(process.argv[1]).by' "$r")
    left=$(node -p 'JSON.parse(process.argv[1]).left.join(" | ")' "$r")
    stderr=$(node -p 'JSON.parse(process.argv[1]).stderr' "$r")
    times+=("$ms")
    bys+=("$by")
    [[ $by == SIGINT ]] && ((limit == 0 || ms <= limit)) && sigint=1
    [[ $by =~ ^($want)$ ]] || [[ $want == SIGINT && $by == SIGTERM ]] || bad="stopped by $by (not $want): $r"
    [[ -z $left ]] || bad="left processes behind: $left"
    [[ -z $stderr ]] || bad="wrote to stderr: ${stderr:0:300}"
  done
  local sorted
  sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
  say "$label: stopped in ${times[*]} ms by ${bys[*]} (sorted: $sorted)"
  if [[ $want == SIGINT ]] && ((sigint == 0)); then
    bad="never stopped by the SIGINT alone (within ${limit} ms; 0: 2 s; Claude Code sends SIGTERM at 100 ms)"
  fi
  if [[ -z $bad ]]; then
    pass "$label: stopped by $want, fastest ${sorted%% *} ms, slowest $(printf '%s\n' "${times[@]}" | sort -n | tail -n 1) ms, nothing left behind"
  else
    fail "$label: $bad"
  fi
}
stop "wrapper (node -> binary), SIGINT" SIGINT "$SIGINT_MAX_MS" node "$wrapper" --root "$proj"
stop "npx -p filewatch-mcp@$version -c 'exec filewatch-mcp …'" SIGINT 0 \
  npx -y -p "filewatch-mcp@$version" -c "exec filewatch-mcp --root '$proj'"
if ((sh_execs)); then
  stop "npx -y filewatch-mcp@$version (this sh execs)" SIGINT 0 npx -y "filewatch-mcp@$version" --root "$proj"
else
  say "this /bin/sh ($(readlink -f /bin/sh)) runs \`sh -c CMD\` as a child and holds SIGINT back until it exits:" \
    "through plain npx, Claude Code's SIGTERM (100 ms after SIGINT) is what stops the server"
  stop "npx -y filewatch-mcp@$version (dash as sh)" "SIGINT|SIGTERM" 0 npx -y "filewatch-mcp@$version" --root "$proj"
fi

# ---- 3. claude mcp add … npx ---------------------------------------------------------------------
version_out=$(as_user "$claude" --version 2>/dev/null || true)
[[ $version_out == "$CLAUDE_CODE_VERSION "* ]] || {
  say "claude did not run (claude --version gave '$version_out')" >&2
  exit 1
}
mcp_list() { # server name pattern, label
  local t0 line
  t0=$(ms_now)
  timeout -k 5 90 env -i HOME="$home" XDG_CONFIG_HOME="$home/.config" PATH="$user_path" \
    LANG=C.UTF-8 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    "$claude" mcp list >"$tmp/list.out" 2>&1 || true
  list_ms=$(($(ms_now) - t0))
  sed 's/^/    /' "$tmp/list.out"
  if line=$(grep -E "^$1: .*✔ Connected" "$tmp/list.out"); then
    pass "$2: claude mcp list in $list_ms ms: $line"
  else
    fail "$2: claude mcp list does not show '$1: … ✔ Connected'"
  fi
}

# Run `claude -p hi --debug` and check the debug log for server NAME: connected, tools, nothing on
# stderr, and the stop (STOP: "clean" = no "SIGINT failed"; "sigterm" = "SIGINT failed" allowed,
# but the SIGTERM must work).
debug_run() {
  local name=$1 label=$2 want=$3 log
  # MCP_CONNECTION_NONBLOCKING=0: `-p` waits for the servers to connect before it goes on (to
  # "Not logged in" and the stop); otherwise it quits after ~3 s whether they are up or not, and
  # npx on a loaded machine can take longer than that.
  as_user env MCP_CONNECTION_NONBLOCKING=0 timeout -k 5 90 "$claude" -p hi --debug </dev/null >"$tmp/p.out" 2>&1 || true
  log=$(ls -t "$home"/.claude/debug/*.txt 2>/dev/null | head -n 1 || true)
  [[ -n $log ]] || {
    fail "$label: no debug log"
    return
  }
  TAG1="MCP server \"$name\"" TAG2="MCP server \\\"$name\\\"" awk '
    /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T/ {
      keep = index($0, ENVIRON["TAG1"]) > 0 || index($0, ENVIRON["TAG2"]) > 0
    }
    keep' "$log" >"$tmp/server.log"
  grep -E 'Successfully connected|SIGINT|SIGTERM|SIGKILL|exited cleanly|Server stderr' "$tmp/server.log" |
    cut -c1-220 | sed 's/^/    /' || true
  local before=${#failures[@]}
  grep -q 'Successfully connected' "$tmp/server.log" || fail "$label: not 'Successfully connected'"
  grep 'Connection established with capabilities' "$tmp/server.log" | grep -q '"hasTools":true' ||
    fail "$label: no '\"hasTools\":true'"
  ! grep -q 'Server stderr:' "$tmp/server.log" || fail "$label: the server wrote to stderr"
  grep -q 'Sending SIGINT to MCP server process' "$tmp/server.log" || fail "$label: no SIGINT sent (stop not logged)"
  ! grep -q 'SIGTERM failed' "$tmp/server.log" || fail "$label: not stopped by SIGTERM either"
  if [[ $want == clean ]] && grep -q 'SIGINT failed' "$tmp/server.log"; then
    fail "$label: 'SIGINT failed' (not stopped within Claude Code's 100 ms)"
  fi
  if ((${#failures[@]} == before)); then
    pass "$label: connected, tools, nothing on stderr, stopped $(grep -q 'SIGINT failed' "$tmp/server.log" &&
      echo 'by SIGTERM after SIGINT' || echo 'on SIGINT')"
  fi
}

rm -rf "$home/.npm" # a cold cache again, for the time to ✔ Connected
as_user "$claude" mcp add filewatch -- npx -y "filewatch-mcp@$version" --root . >/dev/null
mcp_list filewatch "npx registration, cold npm cache"
cold_list_ms=$list_ms
mcp_list filewatch "npx registration, warm npm cache"
warm_list_ms=$list_ms
# What Claude Code itself takes: the same binary registered directly.
as_user "$claude" mcp add filewatch-direct -- "$bin" --root . >/dev/null
mcp_list filewatch-direct "the binary registered directly (Claude Code's own time)"
direct_list_ms=$list_ms
as_user "$claude" mcp remove filewatch-direct -s local >/dev/null
if ((sh_execs)); then
  debug_run filewatch "claude -p --debug, npx registration" clean
else
  debug_run filewatch "claude -p --debug, npx registration (dash: SIGTERM stops it)" sigterm
fi
as_user "$claude" mcp remove filewatch -s local >/dev/null
as_user "$claude" mcp add filewatch -- npx -y -p "filewatch-mcp@$version" -c 'exec filewatch-mcp --root .' >/dev/null
mcp_list filewatch "npx -c 'exec …' registration"
# Through npm (which exits after its child) the stop is on SIGINT, but npm's own exit can take
# this loaded machine past Claude Code's 100 ms: the strict check of that path is the measured
# stop above (the SIGINT alone stops it); here it must connect and stop either way.
debug_run filewatch "claude -p --debug, npx -c 'exec …' registration" sigterm
as_user "$claude" mcp remove filewatch -s local >/dev/null

# ---- 4. the plugin, no binary anywhere ---------------------------------------------------------------
marketplace=$(node -p 'require(process.argv[1]).name' "$repo/.claude-plugin/marketplace.json")
if as_user "$claude" plugin marketplace add "$repo" >"$tmp/plugin.out" 2>&1 &&
  as_user "$claude" plugin install "filewatch@$marketplace" >>"$tmp/plugin.out" 2>&1; then
  pass "claude plugin marketplace add $repo; claude plugin install filewatch@$marketplace"
else
  sed 's/^/    /' "$tmp/plugin.out"
  fail "claude plugin marketplace add / install failed"
fi
plugin_server=plugin:filewatch:filewatch
mcp_list "$plugin_server" "plugin (launcher -> npx)"
debug_run "$plugin_server" "claude -p --debug, plugin" clean

# Without Node (and nothing remembered from before): the stand-in answers, so the server is
# connected and not remembered as failed.
rm -rf "$home/.cache/filewatch-mcp"
mkdir -p "$tmp/no-node-bin"
for t in sh sed tr grep cut mktemp tail head dirname rm sleep cat env; do
  ln -s "$(command -v "$t")" "$tmp/no-node-bin/$t"
done
saved_path=$user_path
user_path=$tmp/no-node-bin
mcp_list "$plugin_server" "plugin without Node (the stand-in)"
user_path=$saved_path
log_line=$(cat "$home"/.cache/claude-cli-nodejs/*/mcp-logs-plugin-filewatch-filewatch/* 2>/dev/null |
  grep -o 'filewatch plugin: [^"\\]*' | head -n 1 || true)
if [[ $log_line == *"no Node.js (npx)"* ]]; then
  pass "plugin without Node: the MCP log says: ${log_line:0:160}…"
else
  fail "plugin without Node: no 'filewatch plugin: … no Node.js (npx) …' line in the plugin's MCP log"
fi
if grep -qs filewatch "$home/.claude/mcp-needs-auth-cache.json"; then
  fail "the plugin's server is in ~/.claude/mcp-needs-auth-cache.json (remembered as failed)"
fi
mcp_list "$plugin_server" "plugin, Node back"
debug_run "$plugin_server" "claude -p --debug, plugin, Node back" clean

# ---- 5. the launcher alone ---------------------------------------------------------------------------
launch=$repo/plugin/bin/filewatch-mcp-launch
handshake='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}'
# npx fails: a registry nothing listens on, an empty cache, no retries.
out=$(printf '%s\n' "$handshake" | as_user env HOME="$tmp/home2" npm_config_registry=http://127.0.0.1:9/ \
  npm_config_fetch_retries=0 "$launch" 2>"$tmp/launch.err" || true)
if [[ $out == *'"instructions":"The filewatch server'*'failed'* ]] && grep -q '^filewatch plugin: .*failed (exit' "$tmp/launch.err"; then
  pass "launcher, npx fails: the stand-in answers initialize; stderr: $(head -c 200 "$tmp/launch.err")…"
else
  fail "launcher, npx fails: stdout '${out:0:200}', stderr '$(head -c 300 "$tmp/launch.err")'"
fi
# npx too slow: a stand-in npx that sleeps.
mkdir -p "$tmp/slow-bin"
printf '#!/bin/sh\necho $$ >"%s"\nexec sleep 30\n' "$tmp/slow-npx.pid" >"$tmp/slow-bin/npx"
chmod +x "$tmp/slow-bin/npx"
t0=$(ms_now)
out=$(printf '%s\n' "$handshake" | as_user env HOME="$tmp/home3" PATH="$tmp/slow-bin:$user_path" FILEWATCH_NPX_TIMEOUT=1 \
  "$launch" 2>"$tmp/launch.err" || true)
if [[ $out == *'"id":1,"result"'* ]] && grep -q 'did not finish within 1 s' "$tmp/launch.err"; then
  pass "launcher, npx too slow: the stand-in answered after $(($(ms_now) - t0)) ms; stderr: $(head -c 160 "$tmp/launch.err")…"
else
  fail "launcher, npx too slow: stdout '${out:0:200}', stderr '$(head -c 300 "$tmp/launch.err")'"
fi
kill "$(cat "$tmp/slow-npx.pid" 2>/dev/null)" 2>/dev/null || true

# The path npx gave is remembered for the next start; a remembered path that is gone is not used.
remembered=$home/.cache/filewatch-mcp/npx-binary-$version
if [[ $(head -n 1 "$remembered" 2>/dev/null) == "$home/.npm/_npx/"*"/bin/filewatch-mcp" ]]; then
  pass "launcher remembered the binary npx gave ($remembered)"
else
  fail "launcher did not remember the binary npx gave in $remembered"
fi
echo "$tmp/no-such-binary" >"$remembered"
out=$(printf '%s\n' "$handshake" | as_user "$launch" 2>"$tmp/launch.err" || true)
if [[ $out == *'"serverInfo":{"name":"filewatch-mcp"'* && $out != *'not running'* ]] && [[ ! -s $tmp/launch.err ]]; then
  pass "launcher with a remembered path that is gone: npx again, the real server answered"
else
  fail "launcher with a remembered path that is gone: stdout '${out:0:200}', stderr '$(head -c 300 "$tmp/launch.err")'"
fi

# ---- summary -------------------------------------------------------------------------------------
say "times: npx -y --version ${cold_npx_ms} ms (cold cache); claude mcp list with the npx registration" \
  "${cold_list_ms} ms (cold cache), ${warm_list_ms} ms (warm), with the binary registered directly ${direct_list_ms} ms"
say "took $((SECONDS - started)) s"
if ((${#failures[@]})); then
  say "${#failures[@]} check(s) failed:" >&2
  printf '  - %s\n' "${failures[@]}" >&2
  exit 1
fi
say "all npm registry checks passed"
