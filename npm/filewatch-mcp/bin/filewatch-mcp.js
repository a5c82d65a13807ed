#!/usr/bin/env node
// The `filewatch-mcp` command of the npm package: runs the prebuilt binary from the platform
// package npm installed beside it (@filewatch-mcp/<platform>-<arch>, one of this package's
// optionalDependencies; npm installs only the one whose `os` and `cpu` match).
//
// The binary gets this process's stdin, stdout and stderr themselves (no copying, so an MCP
// client talks to it directly), the arguments, and the environment. Node cannot replace itself
// with another program, so it stays as a parent: SIGINT, SIGTERM and SIGHUP are passed on (MCP
// clients stop a server with SIGINT and want it gone within ~100 ms), and it exits the way the
// binary did: the same exit code, or the same signal.
//
// FILEWATCH_MCP_PRINT_BINARY=1 prints the binary's absolute path instead of running it (the
// Claude Code plugin's launcher uses it to resolve the binary through `npx`, then runs it itself).
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const pkg = require('../package.json');

const platform = `${process.platform}-${process.arch}`;
const platformPackage = `@filewatch-mcp/${platform}`;
const exe = process.platform === 'win32' ? 'filewatch-mcp.exe' : 'filewatch-mcp';

function fail(message) {
  process.stderr.write(`filewatch-mcp: ${message}\n`);
  process.exit(1);
}

function findBinary() {
  const supported = Object.keys(pkg.optionalDependencies || {}).map((name) =>
    name.replace('@filewatch-mcp/', ''),
  );
  if (!supported.includes(platform)) {
    fail(
      `no prebuilt binary for this platform (${platform}); there are binaries for ` +
        `${supported.join(', ')}. Build it from source instead: in a clone of the repository, ` +
        '`cargo install --locked --path .` (needs a Rust toolchain and a C compiler).',
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${platformPackage}/package.json`));
  } catch {
    fail(
      `the binary for this platform (${platform}) is in the package ${platformPackage}@${pkg.version}, ` +
        'which is not installed. npm installs it with this package unless optional dependencies are ' +
        'turned off (--omit=optional, --no-optional, omit=optional in .npmrc): install again without that.',
    );
  }
  return path.join(dir, 'bin', exe);
}

const binary = findBinary();
if (process.env.FILEWATCH_MCP_PRINT_BINARY === '1') {
  process.stdout.write(`${binary}\n`);
  process.exit(0);
}

const forwarded = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function run(retried) {
  const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit' });
  const forward = (signal) => child.kill(signal);
  // A listener keeps Node from dying of the signal itself: it waits for the binary instead.
  for (const signal of forwarded) process.on(signal, forward);
  child.on('error', (err) => {
    for (const signal of forwarded) process.removeListener(signal, forward);
    // Some package managers unpack without the mode bits the tarball has.
    if (err.code === 'EACCES' && !retried && process.platform !== 'win32') {
      try {
        fs.chmodSync(binary, 0o755);
        return run(true);
      } catch {
        // fall through to the error below
      }
    }
    fail(`cannot run ${binary}: ${err.message}`);
  });
  // Under `npx`, npm runs this through `sh -c`, and a /bin/sh that is dash (Debian, Ubuntu)
  // holds a SIGINT back until its child exits: only Claude Code's SIGTERM 100 ms later stops the
  // shell (npm forwards it), and this process is left without its parent. Then nobody is left
  // to talk to: stop the binary.
  let orphanWatch;
  if (process.env.npm_lifecycle_event === 'npx' && process.platform !== 'win32') {
    const parent = process.ppid;
    orphanWatch = setInterval(() => {
      if (process.ppid !== parent) child.kill('SIGTERM');
    }, 50);
    orphanWatch.unref();
  }
  child.on('exit', (code, signal) => {
    clearInterval(orphanWatch);
    for (const s of forwarded) process.removeListener(s, forward);
    if (signal) {
      // Die of the same signal, so whoever started us sees what the binary did.
      process.kill(process.pid, signal);
      // (A signal that does not end Node, e.g. one it ignores: exit as a shell would.)
      setTimeout(() => process.exit(128 + (require('node:os').constants.signals[signal] || 0)), 100);
    } else {
      process.exit(code ?? 1);
    }
  });
}

run(false);
