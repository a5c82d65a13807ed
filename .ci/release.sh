#!/usr/bin/env bash
# The release, as far as this machine can make it (issue 23): the scripts the release workflow
# (.github/workflows/release.yml) runs, in its order, then the npm packages tested the way a user
# gets them (.ci/npm-registry.sh, a local registry).
#   1. release/check-version: Cargo.toml, Cargo.lock, the plugin, the marketplace and server.json
#      agree, and release/check-registry: the MCP Registry entry, its names and URLs;
#   2. release/build-target for Linux x64 (static musl), and with FILEWATCH_RELEASE_CROSS=1 also
#      Linux arm64 (zig, checked under qemu-user) and Windows x64 (MinGW-w64, checked under Wine):
#      ~4 and ~5 min more on 2 cores. macOS needs Apple's SDK: only the workflow builds it (and
#      .ci/cross.sh compile-checks it);
#   3. release/npm-pack and release/archive on what was built, with checks on the tarballs: the
#      main package holds no binary, each platform package its executable binary; SHA256SUMS
#      verifies;
#   4. .ci/npm-registry.sh on the tarballs.
# Output goes to target/dist (binaries) and target/release-out (tarballs, archives).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-$root/target}
started=$SECONDS
say() { echo ".ci/release.sh: $* ($((SECONDS - started)) s in)"; }

say "release/check-version"
release/check-version

bins=$target_dir/dist
out=$target_dir/release-out
rm -rf "$out" "$bins"
targets=(x86_64-unknown-linux-musl)
if [[ ${FILEWATCH_RELEASE_CROSS:-0} == 1 ]]; then
  targets+=(aarch64-unknown-linux-musl x86_64-pc-windows-gnu)
else
  say "FILEWATCH_RELEASE_CROSS=1 would also build linux-arm64 and win32-x64 (not set: Linux x64 only)"
fi
for t in "${targets[@]}"; do
  say "release/build-target $t"
  release/build-target "$t" "$bins"
done

say "release/npm-pack, release/archive"
release/npm-pack "$out/npm" --bins "$bins" --no-build
release/archive "$bins" "$out/release"
(cd "$out/release" && sha256sum -c --quiet SHA256SUMS) && echo "  ok    SHA256SUMS verifies"

version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
main=$out/npm/filewatch-mcp-$version.tgz
listing=$(tar tzf "$main" | sort | tr '\n' ' ')
if [[ $listing != "package/README.md package/bin/filewatch-mcp.js package/package.json " ]]; then
  echo ".ci/release.sh: the main package holds: $listing" >&2
  exit 1
fi
size=$(wc -c <"$main")
((size < 16384)) || {
  echo ".ci/release.sh: the main package is $size bytes: it should hold no binary" >&2
  exit 1
}
echo "  ok    $(basename "$main"): $size bytes, no binary ($listing)"
for t in "$out"/npm/filewatch-mcp-*-"$version".tgz; do
  mode=$(tar tvzf "$t" | awk '$NF ~ /^package\/bin\/filewatch-mcp(\.exe)?$/ { print $1 }')
  [[ $mode == -rwx* ]] || {
    echo ".ci/release.sh: $(basename "$t") has no executable package/bin/filewatch-mcp[.exe]" >&2
    exit 1
  }
  echo "  ok    $(basename "$t"): $(wc -c <"$t") bytes, bin/filewatch-mcp ($mode)"
done

say ".ci/npm-registry.sh"
.ci/npm-registry.sh "$out/npm"
say "done"
