#!/usr/bin/env bash
# Cross checks (issue 13), on by default; FILEWATCH_SKIP_CROSS=1 skips them.
#  - macOS: `cargo check --all-targets` for x86_64-apple-darwin and aarch64-apple-darwin, with
#    zig (PyPI's ziglang) as the C compiler for the grammars.
#  - Windows: a cross-build for x86_64-pc-windows-gnu (Debian's mingw-w64), the pure and
#    file-system tests run under Wine (the cargo runner in .cargo/config.toml), and
#    `filewatch-mcp.exe scan / stamp / resolve` on a small tree.
# Installs what it needs (rustup targets, apt packages, pip); a toolchain that cannot be had is
# skipped with a message saying so (FILEWATCH_REQUIRE_CROSS=1 makes that an error). Prints the
# minutes it took. Cross builds go to target/<triple>/ and do not disturb the host build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
started=$(date +%s)
say() { echo ".ci/cross.sh: $*"; }
minutes() { awk -v s="$(($(date +%s) - started))" 'BEGIN { printf "%.1f", s / 60 }'; }
skipped=()
skip() {
  say "SKIPPED $1: $2"
  if [[ "${FILEWATCH_REQUIRE_CROSS:-0}" == 1 ]]; then exit 1; fi
  skipped+=("$1")
}

if [[ "${FILEWATCH_SKIP_CROSS:-0}" == 1 ]]; then
  say "skipped (FILEWATCH_SKIP_CROSS=1): macOS and Windows builds are NOT checked"
  exit 0
fi

macos_targets=(x86_64-apple-darwin aarch64-apple-darwin)
windows_target=x86_64-pc-windows-gnu
tools="$target_dir/cross-tools"
mkdir -p "$tools"

# ---- toolchains ------------------------------------------------------------------------------
have_target() { rustup target list --installed 2>/dev/null | grep -qx "$1"; }
add_targets() {
  local missing=()
  for t in "$@"; do have_target "$t" || missing+=("$t"); done
  ((${#missing[@]} == 0)) || rustup target add "${missing[@]}" >/dev/null 2>&1 || true
}
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [[ -z "${apt_updated:-}" ]]; then
    apt_updated=1
    apt-get update -qq >/dev/null 2>&1 || true
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}
command -v rustup >/dev/null || { skip "all cross checks" "rustup not found"; exit 0; }
add_targets "${macos_targets[@]}" "$windows_target"

zig=""
find_zig() {
  python3 -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' \
    2>/dev/null || true
}
if command -v python3 >/dev/null; then
  zig="$(find_zig)"
  if [[ -z "$zig" ]]; then
    say "installing ziglang (pip)"
    # (A Debian system Python refuses plain pip installs: PEP 668.)
    python3 -m pip install -q ziglang >/dev/null 2>&1 ||
      { apt_install python3-pip && python3 -m pip install -q ziglang >/dev/null 2>&1; } ||
      python3 -m pip install -q --break-system-packages ziglang >/dev/null 2>&1 || true
    zig="$(find_zig)"
  fi
fi

wine=""
find_wine() {
  for w in wine64 /usr/lib/wine/wine64 wine; do
    if command -v "$w" >/dev/null 2>&1; then echo "$w"; return; fi
  done
}
wine="$(find_wine)"
if ! command -v x86_64-w64-mingw32-gcc >/dev/null || [[ -z "$wine" ]]; then
  say "installing gcc-mingw-w64-x86-64 and wine64"
  apt_install gcc-mingw-w64-x86-64 wine64 || true
  wine="$(find_wine)"
fi

# ---- macOS: compile check --------------------------------------------------------------------
# cc-rs adds clang's target flags (--target=, -arch, -mmacosx-version-min); zig takes its own
# -target, so the wrapper drops those.
zig_wrapper() { # name, zig subcommand, zig target
  cat >"$tools/$1" <<SH
#!/usr/bin/env bash
args=(); skip=0
for a in "\$@"; do
  if ((skip)); then skip=0; continue; fi
  case "\$a" in
    --target=*|-mmacosx-version-min=*|-mmacos-version-min=*) ;;
    -arch|-isysroot) skip=1 ;;
    *) args+=("\$a") ;;
  esac
done
exec "$zig" $2 -target $3 "\${args[@]}"
SH
  chmod +x "$tools/$1"
}

check_macos() {
  local t=$1 arch=${1%%-*} upper
  upper=$(echo "$t" | tr 'a-z-' 'A-Z_')
  zig_wrapper "cc-$t" cc "$arch-macos"
  zig_wrapper "c++-$t" c++ "$arch-macos"
  printf '#!/usr/bin/env bash\nexec "%s" ar "$@"\n' "$zig" >"$tools/ar-$t"
  chmod +x "$tools/ar-$t"
  say "cargo check --all-targets --target $t"
  env "CC_${t//-/_}=$tools/cc-$t" "CXX_${t//-/_}=$tools/c++-$t" "AR_${t//-/_}=$tools/ar-$t" \
    "CFLAGS_${t//-/_}=-O0 -g0" "CARGO_TARGET_${upper}_LINKER=$tools/cc-$t" \
    cargo check --all-targets --locked --target "$t"
}

if [[ -z "$zig" ]]; then
  skip "macOS" "no zig (pip install ziglang failed)"
else
  for t in "${macos_targets[@]}"; do
    if have_target "$t"; then check_macos "$t"; else skip "macOS $t" "rustup target add $t failed"; fi
  done
fi

# ---- Windows: build, tests under Wine, the binary on a small tree ----------------------------
run_windows() {
  local t=$windows_target log="$tools/wine-tests.log"
  export "CFLAGS_${t//-/_}=-O1 -g0"
  # What Wine cannot run, and why (each runs on Linux; see also the skips the tests print):
  local skips=(
    multi_line_asks_from_head_are_not_announced # runs git: the Wine prefix has no git.exe
    a_takeover_fires_only_the_saves_the_owner_missed # runs git too
    saves_spawn_no_git_and_follow_head           # runs git too
    a_repository_cloned_again_in_place_is_read_anew # runs git too
    a_moved_file_keeps_what_its_old_path_had     # runs git too
    a_resolve_without_a_record_keeps_the_lines_of_head # runs git too
    a_resolve_by_record_keeps_the_lines_of_head  # runs git too
    a_committed_asks_words_typed_elsewhere_are_an_ask # runs git too
    a_long_history_in_git_takes_no_fresh_ask_for_gits # runs git too
    scan_and_stamp_read_an_ask_as_the_server_does # runs git too
    replace_keeps_the_files_times # under Wine the exchange leaves the access time of its moment (the modification time, which editors compare, is kept)
    renames_say_where_a_file_was                 # pairs inotify's rename cookies; Wine's
                                                 # ReadDirectoryChangesW is not Windows'
    walk::tests::honours_gitignore_and_hard_excludes # its expectation joins paths with '\'
    root_must_be_a_readable_directory            # expects Unix's "No such file or directory"
    terminal_output_cannot_be_forged             # a newline in a file name: Windows forbids it
  )
  local skip_args=()
  for s in "${skips[@]}"; do skip_args+=(--skip "$s"); done
  say "cargo check --all-targets --target $t"
  cargo check --all-targets --locked --target "$t"
  # Not run under Wine: watch.rs and editors.rs (real Linux editors), server_binary.rs (Unix
  # signals), stress.rs (Wine, like Windows without POSIX rename semantics, refuses a rename
  # over a file another thread has open; the stamper's reads collide with it constantly),
  # git_provenance.rs (needs git in the Wine prefix), inotify_limit.rs (Linux only).
  say "cargo test --target $t (under Wine): library, corpus, stamp properties, platform, cli, server"
  set +e
  cargo test --locked --target "$t" --no-fail-fast \
    --lib --test corpus --test stamp_props --test platform --test cli --test server \
    -- "${skip_args[@]}" 2>&1 |
    tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  # Tests that return early where the OS cannot do their case say "skipped:" (seen with
  # --nocapture): the platform tests are where such cases live.
  cargo test --locked --target "$t" --test platform -- --nocapture --test-threads=1 2>&1 |
    grep -o 'skipped: .*' | sed 's/^/  platform test /' | tee -a "$log" || true
  awk '/^  platform test skipped:/ { early++ }
       /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i;
       if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i;
       if ($(i+1) == "filtered") s += $i } }
       END { printf "wine: %d passed, %d failed, %d skipped (%d of the passed returned early)\n",
             p, f, s, early }' "$log"
  ((rc == 0)) || { say "Windows tests failed under Wine"; return 1; }
  # The .exe `cargo test` built for the cli tests (a plain `cargo build` would build the
  # dependencies again, without the dev-dependencies' features).
  windows_smoke "$target_dir/$t/debug/filewatch-mcp.exe"
}

# scan, stamp and resolve on a small tree, with the checks a user would make by eye.
windows_smoke() {
  local exe=$1 tree out id
  tree="$(mktemp -d)"
  mkdir -p "$tree/src/deep" "$tree/ignored"
  printf '# @claude explain this\nx = 1\n' >"$tree/src/a.py"
  printf 'fn main() {}\r\n// @claude why CRLF?\r\n' >"$tree/src/deep/b.rs"
  printf '// @claude never seen\n' >"$tree/ignored/c.rs"
  printf 'ignored/\n' >"$tree/.gitignore"
  say "filewatch-mcp.exe scan / stamp / resolve on a small tree"
  out="$(cd "$tree" && "$root/.ci/wine" "$exe" scan --json . | tr -d '\r')"
  echo "$out"
  [[ $(grep -c '"file"' <<<"$out") == 2 ]] || { say "scan: expected 2 markers"; return 1; }
  grep -q '"file":"./src/deep/b.rs"' <<<"$out" || { say "scan: paths must use /"; return 1; }
  out="$(cd "$tree" && "$root/.ci/wine" "$exe" stamp --json . | tr -d '\r')"
  echo "$out"
  id="$(grep -o 'fw-[0-9a-f]\{8\}' <<<"$out" | head -1)"
  [[ -n "$id" ]] || { say "stamp: no id"; return 1; }
  grep -q "@claude\[fw-[0-9a-f]\{8\}\] why CRLF?"$'\r' "$tree/src/deep/b.rs" ||
    { say "stamp: CRLF file not stamped byte-exactly"; return 1; }
  (cd "$tree" && "$root/.ci/wine" "$exe" resolve "$id" . | tr -d '\r')
  if grep -rq "$id" "$tree"; then say "resolve: $id still there"; return 1; fi
  rm -rf "$tree"
  say "Windows binary: scan, stamp, resolve ok"
}

if ! have_target "$windows_target"; then
  skip "Windows" "rustup target add $windows_target failed"
elif ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
  skip "Windows" "no x86_64-w64-mingw32-gcc (apt-get install gcc-mingw-w64-x86-64 failed)"
elif [[ -z "$wine" ]]; then
  say "no Wine (apt-get install wine64 failed): Windows is only compile-checked"
  cargo check --all-targets --locked --target "$windows_target"
  skipped+=("Windows tests")
else
  run_windows
fi

say "done in $(minutes) min${skipped:+; skipped: ${skipped[*]}}"
