// node .ci/sigint-stop.mjs MARK CMD [ARGS...]
//
// Stops an MCP server the way Claude Code 2.1.332 does and says how it went: spawns CMD ARGS with
// pipes on stdin, stdout and stderr, sends `initialize` and `notifications/initialized`, waits
// 500 ms, then sends SIGINT to the spawned process only (Claude Code signals the pid it started,
// e.g. npx, not its process group); if it is still there 100 ms later (SIGTERM_AFTER_MS), SIGTERM;
// 400 ms after that, SIGKILL; then it closes the pipes, as Claude Code closes the transport.
//
// MARK is a string only this server's processes have on their command line (e.g. the temporary
// HOME that holds npx's cache): a process with it still running after the pipes closed means a
// child was left behind (it is killed, and listed).
//
// Prints one JSON line: {"ms": time from SIGINT to the exit, "by": "SIGINT" | "SIGTERM" |
// "SIGKILL" (what was the last signal sent before it exited), "code", "signal", "stderr",
// "left": [command lines]}.
import { spawn, execFileSync } from 'node:child_process';

const [mark, cmd, ...args] = process.argv.slice(2);
// SIGTERM_AFTER_MS (default 100, Claude Code's): a longer grace tells whether the SIGINT alone
// stops the server at all, whatever the machine's load.
const termAfter = Number(process.env.SIGTERM_AFTER_MS || 100);
const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
let out = '';
let stderr = '';
let t0 = 0;
let by = '';
const timers = [];
p.stderr.on('data', (d) => (stderr += d));
// A server that never answers initialize: give up after a minute (npx may be downloading).
const giveUp = setTimeout(() => {
  by = 'no initialize reply';
  p.kill('SIGKILL');
}, 60000);

function leftovers() {
  const ps = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return ps
    .split('\n')
    .filter((l) => l.includes(mark) && !l.includes('sigint-stop.mjs') && !l.includes('ps -eo'))
    .map((l) => l.trim());
}

p.on('exit', (code, signal) => {
  const ms = t0 ? Math.round(performance.now() - t0) : -1;
  clearTimeout(giveUp);
  for (const t of timers) clearTimeout(t);
  p.stdin.destroy();
  p.stdout.destroy();
  p.stderr.destroy();
  // What got the signal (or saw its stdin close) exits within a few ms; what did not stays.
  setTimeout(() => {
    const left = leftovers();
    for (const l of left) {
      try {
        process.kill(Number(l.split(/\s+/)[0]), 'SIGKILL');
      } catch {}
    }
    console.log(JSON.stringify({ ms, by, code, signal, stderr, left }));
  }, 500);
});

p.stdout.on('data', (d) => {
  out += d;
  if (t0 || by || !out.includes('"id":1')) return;
  p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  timers.push(
    setTimeout(() => {
      t0 = performance.now();
      by = 'SIGINT';
      p.kill('SIGINT');
      timers.push(
        setTimeout(() => {
          by = 'SIGTERM';
          p.kill('SIGTERM');
        }, termAfter),
        setTimeout(() => {
          by = 'SIGKILL';
          p.kill('SIGKILL');
        }, termAfter + 400),
      );
    }, 500),
  );
});
p.stdin.write(
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",' +
    '"capabilities":{},"clientInfo":{"name":"claude-code","version":"0"}}}\n',
);
