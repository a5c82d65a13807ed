#!/usr/bin/env bash
# The real Claude Code CLI (pinned, from npm) against the built server, offline:
#   0. the server alone, spawned from Node like Claude Code does: it exits on SIGINT within
#      FILEWATCH_SIGINT_MAX_MS (80 ms; Claude Code sends SIGTERM after 100 ms);
#   1. `claude mcp add` (local scope) + `claude mcp list`: the server is ✔ Connected;
#   2. `claude -p hi --debug` (stops at "Not logged in" after starting the MCP servers): its debug
#      log shows the connection, `"hasTools":true`, a clean stop on SIGINT (no "SIGINT failed") and,
#      unless FILEWATCH_CHECK_STDERR=0, no stderr output from the server;
#   3. the plugin in this repository: `claude plugin validate --strict` (marketplace and plugin),
#      `claude plugin marketplace add <repo>` + `claude plugin install filewatch@<marketplace>`, then
#      `claude mcp list` shows plugin:filewatch:filewatch ✔ Connected and a `-p --debug` run stops it
#      cleanly through the launcher.
# Usage: .ci/claude-code.sh [BINARY]   (default: target/debug/filewatch-mcp under the repo root)
# Needs Node.js with npm (Claude Code wants Node >= 22; it runs on 20 with a warning) and access to
# the npm registry. Everything Claude Code writes goes to a temporary HOME, removed at the end; npm
# downloads through its ordinary cache. FILEWATCH_SKIP_CLAUDE=1 skips the checks when npm is missing.
set -euo pipefail
started=$SECONDS

CLAUDE_CODE_VERSION=2.1.332
# The server must write nothing to stderr in normal operation: Claude Code logs every stderr line
# of a server as an [ERROR]. FILEWATCH_CHECK_STDERR=0 turns that check off.
CHECK_STDERR=${FILEWATCH_CHECK_STDERR:-1}
# How fast the server must exit on SIGINT (Claude Code sends SIGTERM after 100 ms).
SIGINT_MAX_MS=${FILEWATCH_SIGINT_MAX_MS:-80}

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$repo/target/debug/filewatch-mcp}

say() { printf 'claude-code.sh: %s\n' "$*"; }
failures=()
pass() { printf '  ok    %s\n' "$1"; }
fail() {
  failures+=("$1")
  printf '  FAIL  %s\n' "$1"
}

if ! command -v npm >/dev/null; then
  if [[ ${FILEWATCH_SKIP_CLAUDE:-} == 1 ]]; then
    say "npm not found and FILEWATCH_SKIP_CLAUDE=1: SKIPPING the real Claude Code checks"
    exit 0
  fi
  say "npm not found: install Node.js 22+ with npm (or set FILEWATCH_SKIP_CLAUDE=1 to skip these checks)" >&2
  exit 1
fi
if [[ ! -x $bin ]]; then
  say "server binary not found or not executable: $bin (run \`cargo build --locked\` first)" >&2
  exit 1
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/filewatch-claude.XXXXXX")
# FILEWATCH_KEEP_TMP=1 keeps the temporary directory (HOME with the debug logs) for a look.
if [[ ${FILEWATCH_KEEP_TMP:-} == 1 ]]; then
  trap 'say "kept $tmp"' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi

# --- the CLI ----------------------------------------------------------------------------------
# .ci/run installs it once for the tests and passes it in FILEWATCH_CLAUDE_BIN; the version
# check below holds either way.
npm_secs=0 # none when the CLI comes installed
if [[ -n ${FILEWATCH_CLAUDE_BIN:-} && -x $FILEWATCH_CLAUDE_BIN ]]; then
  claude=$FILEWATCH_CLAUDE_BIN
  say "using $claude (FILEWATCH_CLAUDE_BIN)"
else
  say "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION with npm"
  npm_started=$SECONDS
  npm install --prefix "$tmp/cli" --no-audit --no-fund --no-progress --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >/dev/null
  npm_secs=$((SECONDS - npm_started))
  claude=$tmp/cli/node_modules/.bin/claude
  say "npm install took ${npm_secs}s"
fi

# A clean, offline identity: temporary HOME, no credentials or settings of the caller (an API key
# in the environment would make `claude -p hi` really ask the model), no update checks.
while IFS= read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(CLAUDE|ANTHROPIC)' || true)
export HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home/.config
mkdir -p "$HOME"
export DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
unset FILEWATCH_MCP_BIN

version=$("$claude" --version 2>/dev/null || true)
if [[ $version == "$CLAUDE_CODE_VERSION "* ]]; then
  pass "claude --version: $version"
else
  say "claude did not run (claude --version gave '$version')" >&2
  exit 1
fi

proj=$tmp/proj
mkdir -p "$proj/src"
printf 'def greet(name):\n    return f"hello {name}"\n' >"$proj/src/hello.py"
cd "$proj"

# Timestamp (ms since the epoch) of a debug-log line ("2026-01-01T00:00:00.000Z [DEBUG] ...").
log_ms() { date -u -d "${1%% *}" +%s%3N; }

# Run `claude -p hi --debug` in the project, then check the debug log for server NAME
# (as Claude Code names it: "filewatch", "plugin:filewatch:filewatch").
debug_run() {
  local name=$1 label=$2 rc=0 log
  timeout -k 5 60 "$claude" -p hi --debug </dev/null >"$tmp/p.out" 2>&1 || rc=$?
  say "claude -p hi --debug exited $rc ($(head -c 200 "$tmp/p.out" | tr '\n' ' '))"
  log=$(ls -t "$HOME"/.claude/debug/*.txt 2>/dev/null | head -n 1 || true)
  if [[ -z $log ]]; then
    fail "$label: no debug log under $HOME/.claude/debug"
    return
  fi
  # This server's entries: `MCP server "NAME": ...`, and errors as `"MCP server \"NAME\" ..."`
  # (a JSON string, newlines as \n). Lines without a timestamp continue the entry before them.
  TAG1="MCP server \"$name\"" TAG2="MCP server \\\"$name\\\"" awk '
    /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T/ {
      keep = index($0, ENVIRON["TAG1"]) > 0 || index($0, ENVIRON["TAG2"]) > 0
    }
    keep' "$log" >"$tmp/server.log"
  echo "  --- debug log, server \"$name\" (connection, capabilities, stop):"
  grep -E 'Successfully connected|Connection established with capabilities|SIGINT|SIGTERM|SIGKILL|exited cleanly|connection closed|Cleanup timeout' \
    "$tmp/server.log" | sed 's/^/    /' || true

  if grep -q 'Successfully connected' "$tmp/server.log"; then
    pass "$label: Successfully connected"
  else
    fail "$label: no 'Successfully connected' in the debug log"
    grep -E 'ERROR|rror' "$tmp/server.log" | head -n 20 | sed 's/^/    /' || true
  fi
  if grep 'Connection established with capabilities' "$tmp/server.log" | grep -q '"hasTools":true'; then
    pass "$label: capabilities with \"hasTools\":true"
  else
    fail "$label: capabilities without \"hasTools\":true"
  fi

  # The stop: Claude Code sends SIGINT, polls every 50 ms ("exited cleanly"), looks again after
  # 100 ms and logs "SIGINT failed, sending SIGTERM" if the process is still there (SIGKILL 400 ms
  # later). A busy event loop delays those timers, so a server slower than 100 ms is not always
  # caught here: the direct measurement (step 0) is the strict check.
  local sigint sigfail exited closed
  sigint=$(grep -m1 'Sending SIGINT to MCP server process' "$tmp/server.log" || true)
  sigfail=$(grep -m1 'SIGINT failed' "$tmp/server.log" || true)
  exited=$(grep -m1 'MCP server process exited cleanly' "$tmp/server.log" || true)
  closed=$(grep -m1 'connection closed after' "$tmp/server.log" || true)
  if [[ -z $sigint ]]; then
    fail "$label: no 'Sending SIGINT to MCP server process' in the debug log (the stop was not logged)"
  else
    if [[ -n $exited ]]; then
      say "$label: 'exited cleanly' logged $(($(log_ms "$exited") - $(log_ms "$sigint"))) ms after 'Sending SIGINT'"
    fi
    if [[ -n $closed ]]; then
      say "$label: 'connection closed' logged $(($(log_ms "$closed") - $(log_ms "$sigint"))) ms after 'Sending SIGINT'"
    fi
    if [[ -n $sigfail ]]; then
      say "$label: Claude Code's SIGINT grace period, measured: $(($(log_ms "$sigfail") - $(log_ms "$sigint"))) ms ('Sending SIGINT' -> 'SIGINT failed')"
      fail "$label: the server did not exit on SIGINT within Claude Code's grace period ('SIGINT failed, sending SIGTERM')"
    else
      pass "$label: no 'SIGINT failed' in the debug log"
    fi
  fi

  # The server's stderr is logged as [ERROR] "MCP server \"NAME\" Server stderr: LINE\nLINE...":
  # what it wrote while connecting in one entry, later output as it comes.
  local entries stderr_lines
  entries=$(grep -c 'Server stderr:' "$tmp/server.log" || true)
  grep 'Server stderr:' "$tmp/server.log" | sed 's/^.*Server stderr: //; s/"$//; s/\\n/\n/g' |
    grep -v '^$' >"$tmp/stderr.txt" || true
  stderr_lines=$(wc -l <"$tmp/stderr.txt")
  echo "  --- 'Server stderr:' entries for \"$name\": $entries ($stderr_lines lines of stderr)"
  grep 'Server stderr:' "$tmp/server.log" | cut -c1-200 | sed 's/^/    /' || true
  echo "  --- those stderr lines (the first 40, cut at 200 characters):"
  head -n 40 "$tmp/stderr.txt" | cut -c1-200 | sed 's/^/    /'
  if ((entries == 0)); then
    pass "$label: nothing on stderr"
  elif [[ $CHECK_STDERR == 1 ]]; then
    fail "$label: the server wrote to stderr in normal operation ($stderr_lines lines in $entries 'Server stderr:' entries; FILEWATCH_CHECK_STDERR=0 turns this check off)"
  else
    say "$label: stderr check off (FILEWATCH_CHECK_STDERR=0)"
  fi
}

# --- 0. the server alone: how fast it exits on SIGINT -------------------------------------------
# Spawned from Node as Claude Code does (pipes on stdin, stdout, stderr), initialized, then SIGINT;
# it must be gone well inside Claude Code's 100 ms. Three runs, the slowest counts.
cat >"$tmp/sigint.mjs" <<'JS'
import { spawn } from 'node:child_process';
const [bin, root] = process.argv.slice(2);
const p = spawn(bin, ['--root', root], { stdio: ['pipe', 'pipe', 'pipe'] });
let out = '', stderr = '', t0 = 0;
p.stderr.on('data', (d) => (stderr += d));
const timer = setTimeout(() => p.kill('SIGKILL'), 10000);
p.on('exit', (code, signal) => {
  clearTimeout(timer);
  const ms = t0 && signal !== 'SIGKILL' ? Math.round(performance.now() - t0) : -1;
  console.log(JSON.stringify({ ms, code, signal, stderr }));
});
p.stdout.on('data', (d) => {
  out += d;
  if (t0 || !out.includes('"id":1')) return;
  p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  setTimeout(() => { t0 = performance.now(); p.kill('SIGINT'); }, 500);
});
p.stdin.write('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",' +
  '"capabilities":{},"clientInfo":{"name":"claude-code","version":"0"}}}\n');
JS
sigint_max=0
for _ in 1 2 3; do
  r=$(node "$tmp/sigint.mjs" "$bin" "$proj" || true)
  say "server alone, SIGINT: $r"
  ms=$(node -p 'JSON.parse(process.argv[1]).ms' "$r" 2>/dev/null || echo -1)
  if ((ms < 0)); then
    sigint_max=-1
    break
  fi
  if ((ms > sigint_max)); then sigint_max=$ms; fi
done
if ((sigint_max >= 0 && sigint_max <= SIGINT_MAX_MS)); then
  pass "server alone: exits on SIGINT in ${sigint_max} ms at most (limit ${SIGINT_MAX_MS} ms)"
else
  fail "server alone: exit on SIGINT took ${sigint_max} ms (-1: not at all), limit ${SIGINT_MAX_MS} ms (Claude Code sends SIGTERM after 100 ms)"
fi

# --- 1. claude mcp add / list ------------------------------------------------------------------
say "claude mcp add filewatch -- $bin --root $proj"
"$claude" mcp add filewatch -- "$bin" --root "$proj" >/dev/null
timeout -k 5 60 "$claude" mcp list >"$tmp/list.out" 2>&1 || true
echo "  --- claude mcp list:"
sed 's/^/    /' "$tmp/list.out"
if line=$(grep -E '^filewatch: .*✔ Connected' "$tmp/list.out"); then
  pass "claude mcp list: $line"
else
  fail "claude mcp list does not show 'filewatch: ... ✔ Connected'"
fi

# --- 2. a -p --debug run --------------------------------------------------------------------------
debug_run filewatch "local server"
"$claude" mcp remove filewatch -s local >/dev/null

# --- 3. the plugin -------------------------------------------------------------------------------
for dir in "$repo" "$repo/plugin"; do
  rc=0
  "$claude" plugin validate --strict "$dir" >"$tmp/validate.out" 2>&1 || rc=$?
  echo "  --- claude plugin validate --strict ${dir#"$repo"/}:"
  grep -v '^$' "$tmp/validate.out" | sed 's/^/    /'
  if ((rc == 0)); then
    pass "claude plugin validate --strict $dir"
  else
    fail "claude plugin validate --strict $dir exited $rc"
  fi
done

# The launcher without a binary anywhere and without Node (so no npx) does not exit (Claude Code
# would remember the failure): it answers initialize as a stand-in and says on stderr, in one
# line, what is missing. (.ci/npm-registry.sh tests it with npx and with Claude Code.)
mkdir -p "$tmp/no-node-bin"
for t in sh sed tr grep cut mktemp tail head dirname rm sleep cat; do
  ln -sf "$(command -v "$t")" "$tmp/no-node-bin/$t"
done
rc=0
out=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}' |
  env -u FILEWATCH_MCP_BIN -u CARGO_HOME PATH="$tmp/no-node-bin" "$repo/plugin/bin/filewatch-mcp-launch" \
    2>"$tmp/launch.err") || rc=$?
if ((rc == 0)) && [[ $out == *'"id":1,"result"'*'(not running)'* ]] &&
  [[ $(wc -l <"$tmp/launch.err") == 1 ]] && grep -q '^filewatch plugin: .*no Node.js (npx)' "$tmp/launch.err"; then
  pass "launcher without a binary or Node: the stand-in answers initialize; stderr: $(cut -c1-160 "$tmp/launch.err")…"
else
  fail "launcher without a binary or Node: exit $rc, stdout: ${out:0:200}, stderr: $(cat "$tmp/launch.err")"
fi

marketplace=$(node -p 'require(process.argv[1]).name' "$repo/.claude-plugin/marketplace.json")
export FILEWATCH_MCP_BIN=$bin
if "$claude" plugin marketplace add "$repo" >"$tmp/plugin.out" 2>&1 &&
  "$claude" plugin install "filewatch@$marketplace" >>"$tmp/plugin.out" 2>&1; then
  sed 's/^/    /' "$tmp/plugin.out"
  pass "claude plugin marketplace add $repo; claude plugin install filewatch@$marketplace"
  timeout -k 5 60 "$claude" mcp list >"$tmp/list.out" 2>&1 || true
  echo "  --- claude mcp list:"
  sed 's/^/    /' "$tmp/list.out"
  if line=$(grep -E '^plugin:filewatch:[^:]+: .*✔ Connected' "$tmp/list.out"); then
    pass "claude mcp list: $line"
    debug_run "$(printf '%s' "$line" | sed 's/: .*//')" "plugin server"
  else
    fail "claude mcp list does not show 'plugin:filewatch:...: ✔ Connected'"
  fi
else
  sed 's/^/    /' "$tmp/plugin.out"
  fail "claude plugin marketplace add / install failed"
fi

# --- summary ---------------------------------------------------------------------------------------
say "took $((SECONDS - started))s (npm install ${npm_secs}s)"
if ((${#failures[@]})); then
  say "${#failures[@]} check(s) failed:" >&2
  printf '  - %s\n' "${failures[@]}" >&2
  exit 1
fi
say "all real Claude Code checks passed"
