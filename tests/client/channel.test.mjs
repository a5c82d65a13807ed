// Conformance test: filewatch-mcp driven by the official MCP TypeScript SDK client, set up the
// way Claude Code sets it up (stdio transport, client capabilities and info, and Claude Code's
// own zod schema for `notifications/claude/channel`).
//
//   npm ci && FILEWATCH_BIN=/path/to/filewatch-mcp npm test
//
// FILEWATCH_BIN defaults to ../../target/debug/filewatch-mcp (relative to this file).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { z } from 'zod';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.resolve(HERE, process.env.FILEWATCH_BIN || '../../target/debug/filewatch-mcp');
const DEBOUNCE_MS = 100;
const DEADLINE_MS = 10_000;
const LATENCY_SAVES = 20;
const KNOWN_PROTOCOLS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const ID_RE = /^fw-[0-9a-f]{8}$/;
const META_KEY_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

// Exactly the schema Claude Code registers for channel messages. A notification that does not
// parse (e.g. a non-string meta value) never reaches the handler: the SDK reports it through
// `client.onerror` and Claude Code drops it.
const ChannelNotificationSchema = z.object({
  method: z.literal('notifications/claude/channel'),
  params: z.object({
    content: z.string(),
    meta: z.record(z.string(), z.string()).optional(),
  }),
});

describe('filewatch-mcp with the MCP TypeScript SDK client (as Claude Code)', { timeout: 120_000 }, () => {
  let root; // the temp project
  let client;
  let transport;
  let child; // the server process (the transport's ChildProcess)
  let childExit; // resolves with {code, signal} when the server process exits
  let negotiatedProtocol;
  const clientErrors = [];
  const rawChannel = []; // channel notifications as they came off the wire
  const received = []; // {n, at}: channel notifications accepted by the schema handler
  const waiters = new Set();
  let replyTo; // the id of a.py's ask

  function onChannel(n) {
    const entry = { n, at: performance.now() };
    received.push(entry);
    for (const w of waiters) {
      if (w.pred(n)) {
        waiters.delete(w);
        w.resolve(entry);
      }
    }
  }

  /** The first accepted channel notification matching `pred`, or a rejection after `ms`. */
  function waitForChannel(pred, what, ms = DEADLINE_MS) {
    const seen = received.find((e) => pred(e.n));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(w);
        reject(
          new Error(
            `no channel notification for ${what} within ${ms} ms; ` +
              `on the wire: ${JSON.stringify(rawChannel)}; client errors: ${clientErrors.map(String)}`,
          ),
        );
      }, ms);
      const w = {
        pred,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      };
      waiters.add(w);
    });
  }

  const forFile = (file) => (n) => n.params.meta?.file === file;

  function toolText(result) {
    assert.ok(Array.isArray(result.content), `tool result has content: ${JSON.stringify(result)}`);
    const texts = result.content.filter((c) => c.type === 'text').map((c) => c.text);
    assert.ok(texts.length > 0, `tool result has a text block: ${JSON.stringify(result)}`);
    return texts.join('\n');
  }

  const read = (file) => fs.readFileSync(path.join(root, file), 'utf8');

  /** Polls `cond` every 50 ms until it holds; a rejection saying `what` after `ms`. */
  async function waitUntil(cond, what, ms = DEADLINE_MS) {
    const end = performance.now() + ms;
    while (!cond()) {
      if (performance.now() > end) throw new Error(`${what}: not within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  before(async () => {
    if (!fs.existsSync(BIN)) {
      throw new Error(
        `filewatch-mcp binary not found at ${BIN}: run \`cargo build\` in the repository root, ` +
          `or set FILEWATCH_BIN to the binary's path`,
      );
    }
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'filewatch-mcp-client-')));
    // Present before the server starts and never saved while it runs: listed as unannounced.
    fs.writeFileSync(path.join(root, 'pre.py'), '# @claude already here\n');

    transport = new StdioClientTransport({
      command: BIN,
      // --settle 2s: the quiet after a safe save before a tag goes in (5 s by default).
      args: ['--root', root, '--debounce', `${DEBOUNCE_MS}ms`, '--settle', '2s'],
      stderr: 'pipe',
    });
    transport.stderr.on('data', (chunk) => {
      for (const line of String(chunk).split('\n')) {
        if (line) process.stderr.write(`[filewatch-mcp stderr] ${line}\n`);
      }
    });
    // The SDK chains handlers set on the transport before connect(): a tap on the raw wire.
    transport.onmessage = (message) => {
      if (message.method === 'notifications/claude/channel') rawChannel.push(message);
    };
    // The client hands the negotiated version to transports that take it (HTTP); stdio does
    // not, so this is where it can be read.
    transport.setProtocolVersion = (v) => {
      negotiatedProtocol = v;
    };

    client = new Client({ name: 'claude-code', version: '2.1.332' }, { capabilities: { roots: {} } });
    client.onerror = (e) => clientErrors.push(e);
    client.setNotificationHandler(ChannelNotificationSchema, onChannel);

    await client.connect(transport);
    child = transport._process;
    assert.ok(child, 'the transport spawned the server');
    childExit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  });

  after(async () => {
    for (const w of waiters) w.resolve(undefined);
    try {
      await client?.close();
    } catch {
      // already closed
    }
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  it('the schema is strict: a non-string meta value would be dropped', () => {
    const ok = { method: 'notifications/claude/channel', params: { content: 'x', meta: { line: '1' } } };
    assert.equal(ChannelNotificationSchema.safeParse(ok).success, true);
    const bad = { method: 'notifications/claude/channel', params: { content: 'x', meta: { line: 1 } } };
    assert.equal(ChannelNotificationSchema.safeParse(bad).success, false);
  });

  it('initialize: channel capability, tools, server info, instructions, protocol', () => {
    const caps = client.getServerCapabilities();
    assert.ok(caps, 'server capabilities');
    assert.ok(caps.experimental, `capabilities.experimental present: ${JSON.stringify(caps)}`);
    assert.deepEqual(caps.experimental['claude/channel'], {});
    assert.ok(caps.tools, `capabilities.tools present: ${JSON.stringify(caps)}`);
    assert.equal(client.getServerVersion()?.name, 'filewatch-mcp');
    const instructions = client.getInstructions();
    assert.equal(typeof instructions, 'string');
    assert.ok(instructions.trim().length > 0, 'instructions non-empty');
    assert.ok(instructions.length <= 4096, `instructions are ${instructions.length} chars (> 4096)`);
    assert.ok(
      KNOWN_PROTOCOLS.includes(negotiatedProtocol),
      `negotiated protocol ${negotiatedProtocol} is one of ${KNOWN_PROTOCOLS}`,
    );
    console.log(`negotiated protocol version: ${negotiatedProtocol}`);
  });

  it('tools/list: list_asks and resolve_ask with input schemas', async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ['list_asks', 'resolve_ask']) {
      const tool = byName.get(name);
      assert.ok(tool, `${name} listed among ${[...byName.keys()]}`);
      assert.equal(tool.inputSchema?.type, 'object', `${name} input schema: ${JSON.stringify(tool.inputSchema)}`);
    }
    assert.ok(byName.get('list_asks').inputSchema.properties?.path, 'list_asks takes path');
    const resolve = byName.get('resolve_ask').inputSchema;
    assert.ok(resolve.properties?.id, 'resolve_ask takes id');
    assert.ok(resolve.required?.includes('id'), `resolve_ask requires id: ${JSON.stringify(resolve)}`);
  });

  it('a saved @claude comment is announced on the channel, and stamped once heard', async () => {
    fs.writeFileSync(path.join(root, 'a.py'), 'x = 1  # @claude why one?\n');
    const { n } = await waitForChannel(forFile('a.py'), 'a.py');
    const { content, meta } = n.params;
    assert.equal(content, '@claude why one?');
    assert.ok(meta, 'meta present');
    assert.equal(meta.file, 'a.py');
    assert.equal(meta.line, '1');
    assert.match(meta.replyTo, ID_RE);
    assert.equal(meta.language, 'python');
    for (const [k, v] of Object.entries(meta)) {
      assert.match(k, META_KEY_RE, `meta key ${JSON.stringify(k)} is an identifier`);
      assert.equal(typeof v, 'string', `meta.${k} is a string`);
    }
    assert.equal('source' in meta, false, 'no source key in meta (Claude Code sets it)');
    // The raw message agrees with what the schema handler got (nothing stripped or coerced).
    const raw = rawChannel.find((m) => m.params?.meta?.file === 'a.py');
    assert.deepEqual(raw.params, n.params);
    replyTo = meta.replyTo;
    // Sent is not heard: the tag waits for evidence that Claude heard the ask. A tool call
    // naming it is such evidence (Claude lists the asks). Then the tag waits for a safe moment:
    // a save that leaves the ask's line alone (the user works elsewhere in the file), and
    // --settle of quiet after it — a tag written while the cursor is on the ask's line would
    // move the cursor in the user's editor (docs/editors.md).
    const listed = await client.callTool({ name: 'list_asks', arguments: {} });
    assert.ok(!listed.isError, JSON.stringify(listed));
    fs.writeFileSync(path.join(root, 'a.py'), 'x = 1  # @claude why one?\ny = 2\n');
    await waitUntil(
      () => read('a.py') === `x = 1  # @claude[${replyTo}] why one?\ny = 2\n`,
      `a.py stamped with ${replyTo} (now ${JSON.stringify(read('a.py'))})`,
    );
  });

  it(`save→notification latency over ${LATENCY_SAVES} saves (informational)`, async () => {
    const samples = [];
    for (let i = 1; i <= LATENCY_SAVES; i++) {
      const file = `ask_${String(i).padStart(2, '0')}.py`;
      const t0 = performance.now();
      fs.writeFileSync(path.join(root, file), `# @claude ask ${i}\n`);
      const { n, at } = await waitForChannel(forFile(file), file);
      assert.equal(n.params.content, `@claude ask ${i}`);
      assert.match(n.params.meta.replyTo, ID_RE);
      samples.push(at - t0 - DEBOUNCE_MS);
    }
    const sorted = [...samples].sort((a, b) => a - b);
    const pct = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
    console.log(
      `latency save→channel notification minus the ${DEBOUNCE_MS} ms debounce over ${samples.length} saves: ` +
        `p50 ${pct(50).toFixed(1)} ms, p99 ${pct(99).toFixed(1)} ms ` +
        `(min ${sorted[0].toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms)`,
    );
  });

  it('list_asks: pending has the announced ask, unannounced has the untouched one', async () => {
    assert.ok(replyTo, 'an ask was announced earlier');
    const result = await client.callTool({ name: 'list_asks', arguments: {} });
    assert.notEqual(result.isError, true, `list_asks failed: ${JSON.stringify(result)}`);
    const listing = JSON.parse(toolText(result));
    assert.ok(Array.isArray(listing.pending) && Array.isArray(listing.unannounced), JSON.stringify(listing));
    const mine = listing.pending.find((p) => p.id === replyTo);
    assert.ok(mine, `pending contains ${replyTo}: ${JSON.stringify(listing.pending)}`);
    assert.equal(mine.file, 'a.py');
    assert.equal(String(mine.line), '1');
    assert.equal(mine.language, 'python');
    assert.equal(typeof mine.text, 'string');
    assert.equal(listing.pending.length, 1 + LATENCY_SAVES, JSON.stringify(listing.pending));
    const pre = listing.unannounced.find((u) => u.file === 'pre.py');
    assert.ok(pre, `unannounced contains pre.py: ${JSON.stringify(listing.unannounced)}`);
    assert.equal(pre.id ?? null, null, "an unannounced marker has no id");

    const scoped = JSON.parse(toolText(await client.callTool({ name: 'list_asks', arguments: { path: 'a.py' } })));
    assert.deepEqual(
      scoped.pending.map((p) => p.id),
      [replyTo],
      `list_asks {path: "a.py"}: ${JSON.stringify(scoped)}`,
    );
    assert.deepEqual(scoped.unannounced, []);
  });

  it('resolve_ask removes the marker line; a second call is an error naming the id', async () => {
    assert.ok(replyTo, 'an ask was announced earlier');
    const ok = await client.callTool({ name: 'resolve_ask', arguments: { id: replyTo } });
    assert.notEqual(ok.isError, true, `resolve_ask failed: ${JSON.stringify(ok)}`);
    assert.equal(read('a.py'), 'x = 1\ny = 2\n');

    const again = await client.callTool({ name: 'resolve_ask', arguments: { id: replyTo } });
    assert.equal(again.isError, true, `second resolve_ask: ${JSON.stringify(again)}`);
    assert.ok(toolText(again).includes(replyTo), `error text names ${replyTo}: ${toolText(again)}`);
  });

  it('every channel notification on the wire passed the schema; no client errors', () => {
    assert.deepEqual(clientErrors.map(String), []);
    assert.equal(received.length, rawChannel.length, JSON.stringify(rawChannel));
    assert.equal(
      received.some((e) => e.n.params.meta?.file === 'pre.py'),
      false,
      'pre.py (never saved while watching) was not announced',
    );
  });

  it('closing the client ends the server process', async () => {
    const t0 = performance.now();
    await client.close();
    const exit = await Promise.race([
      childExit,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error('server process still running 5 s after close')), 5_000).unref(),
      ),
    ]);
    const took = performance.now() - t0;
    console.log(`server exited ${JSON.stringify(exit)} ${took.toFixed(0)} ms after client.close()`);
    // The SDK closes stdin, waits up to 2 s, then sends SIGTERM: exiting on stdin EOF beats that.
    assert.ok(took < 2_000, `server exited on stdin EOF (took ${took.toFixed(0)} ms)`);
    assert.deepEqual(exit, { code: 0, signal: null });
  });
});
