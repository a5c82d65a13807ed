// A real VS Code (code-server, in headless Chromium) beside `filewatch-mcp watch --json`, driven
// as a person drives it: real key events at a person's pace, Ctrl+S to save, and what the person
// sees read from the page — the buffer's visible lines, the tab's dirty dot, the status bar's
// `Ln N, Col M`, the notification toasts — beside the disk's bytes and what watch printed.
//
//   const s = await Session.start({ name: 'manual-save', files: { 'app.py': '…' } });
//   await s.open('app.py'); await s.goto(3, 1); await s.type('# @claude why?'); await s.save();
//   await s.waitFor('the tag', () => /@claude\[fw-/.test(s.disk('app.py')), 15_000);
//   const { toasts, cursor, dirty, lines } = await s.state();
//   await s.close();
//
// Every session writes a timeline (what the editor showed, the disk held and watch printed, each
// with its time since the start) and screenshots to artifacts/<name>/ (FW_VSCODE_ARTIFACTS
// overrides the folder), so a failure can be read after the fact.
//
// Needs: Node 24 (what code-server 4.139.1 runs on; `code-server` from this folder's
// node_modules), Chromium at FW_CHROMIUM (default /usr/bin/chromium), and FILEWATCH_BIN (default
// ../../target/debug/filewatch-mcp). `.ci/vscode.sh` installs all of it.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const BIN = path.resolve(HERE, process.env.FILEWATCH_BIN || '../../target/debug/filewatch-mcp');
const CODE_SERVER = path.join(HERE, 'node_modules/code-server/out/node/entry.js');
const CHROMIUM = process.env.FW_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.FW_VSCODE_ARTIFACTS || path.join(HERE, 'artifacts');

/** A person's typing pace: 120 ms between keys (about 80 words a minute). */
export const KEY_DELAY_MS = 120;
/** VS Code's toast when a save finds the file changed on disk since it was read. */
export const CONFLICT = /The content of the file is newer/;
const START_DEADLINE_MS = 90_000;
const SAMPLE_MS = 100;

/** The settings of a person who left VS Code's defaults alone, except for what makes the
 * scenario readable: no start page, no trust prompt, no AI side bar, no network chatter, and no
 * typing aids that change what a key inserts (auto-closing brackets, auto-indent, suggestions) —
 * so that what reaches the disk can be compared with what was typed, character for character. */
function settings(autosaveDelayMs) {
  return {
    'files.autoSave': autosaveDelayMs ? 'afterDelay' : 'off',
    ...(autosaveDelayMs ? { 'files.autoSaveDelay': autosaveDelayMs } : {}),
    'workbench.startupEditor': 'none',
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'workbench.tips.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'workbench.enableExperiments': false,
    'security.workspace.trust.enabled': false,
    'security.workspace.trust.startupPrompt': 'never',
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoUpdate': false,
    'extensions.autoCheckUpdates': false,
    'extensions.ignoreRecommendations': true,
    'chat.disableAIFeatures': true,
    'git.enabled': false,
    'github.gitAuthentication': false,
    'editor.autoClosingBrackets': 'never',
    'editor.autoClosingQuotes': 'never',
    'editor.autoClosingComments': 'never',
    'editor.autoSurround': 'never',
    'editor.autoIndent': 'none',
    'editor.formatOnType': false,
    'editor.quickSuggestions': { other: false, comments: false, strings: false },
    'editor.suggestOnTriggerCharacters': false,
    'editor.acceptSuggestionOnEnter': 'off',
    'editor.wordBasedSuggestions': 'off',
    'editor.parameterHints.enabled': false,
    'editor.inlineSuggest.enabled': false,
    'editor.minimap.enabled': false,
    'files.insertFinalNewline': false,
    'files.trimTrailingWhitespace': false,
  };
}

export class Session {
  /**
   * Starts filewatch-mcp watch and code-server on a fresh temp project holding `files`, and
   * opens the project in Chromium. `autosave`: VS Code's `files.autoSaveDelay` in ms for
   * `files.autoSave: afterDelay`, or 0 (off). `watchArgs`: extra flags for `watch` (none: the
   * defaults; null: no filewatch-mcp at all, VS Code alone). `env`: extra environment for
   * filewatch-mcp.
   */
  static async start({ name, files = {}, autosave = 0, watchArgs = [], env = {} }) {
    const s = new Session(name);
    try {
      await s.#start(files, autosave, watchArgs, env);
    } catch (e) {
      await s.close();
      throw e;
    }
    return s;
  }

  constructor(name) {
    this.name = name;
    this.t0 = Date.now();
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), `fw-vscode-${name}-`));
    this.proj = path.join(this.tmp, 'proj');
    this.stateDir = path.join(this.tmp, 'state');
    // code-server's own place for its user data (~/.local/share/code-server): filewatch-mcp
    // reads VS Code's settings where VS Code keeps them, given this XDG_DATA_HOME.
    this.xdgData = path.join(this.tmp, 'data');
    this.userData = path.join(this.xdgData, 'code-server');
    this.out = path.join(ARTIFACTS, name);
    fs.rmSync(this.out, { recursive: true, force: true });
    fs.mkdirSync(this.out, { recursive: true });
    /** Every ask watch printed, parsed, with `at` (ms since the start). */
    this.asks = [];
    /** What happened, in order: {at, what, ...}. */
    this.timeline = [];
    /** Every distinct toast text seen, with when it was first seen. */
    this.toastsSeen = [];
    this.watchLog = [];
    this.codeServerLog = '';
    this.closed = false;
  }

  /** Milliseconds since the session started. */
  now() {
    return Date.now() - this.t0;
  }

  note(what, detail = {}) {
    this.timeline.push({ at: this.now(), what, ...detail });
  }

  async #start(files, autosave, watchArgs, env) {
    fs.mkdirSync(this.proj);
    fs.mkdirSync(this.stateDir);
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(this.proj, rel)), { recursive: true });
      fs.writeFileSync(path.join(this.proj, rel), text);
    }
    this.env = {
      ...process.env,
      FILEWATCH_STATE_DIR: this.stateDir,
      XDG_DATA_HOME: this.xdgData,
      XDG_CONFIG_HOME: path.join(this.tmp, 'config'), // no other VS Code's settings
      ...env,
    };
    // VS Code's settings first: filewatch-mcp reads them when it starts.
    fs.mkdirSync(path.join(this.userData, 'User'), { recursive: true });
    fs.writeFileSync(path.join(this.userData, 'User/settings.json'), JSON.stringify(settings(autosave), null, 2));
    if (watchArgs) await this.#startWatch(watchArgs);
    const url = await this.#startCodeServer();
    await this.#startBrowser(url);
    this.#sample();
  }

  async #startWatch(watchArgs) {
    const args = ['watch', '--json', '--log-level', 'debug', ...watchArgs, this.proj];
    this.watch = spawn(BIN, args, { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.watchExit = new Promise((resolve) => this.watch.on('exit', (code, signal) => resolve({ code, signal })));
    lines(this.watch.stdout, (line) => {
      const ask = { at: this.now(), ...JSON.parse(line) };
      this.asks.push(ask);
      this.note('watch printed an ask', { id: ask.id, text: ask.text, line: ask.line, revised: !!ask.revised });
    });
    lines(this.watch.stderr, (line) => {
      this.watchLog.push(`${this.now()} ${line}`);
      if (/tagged \d+ ask|resolved|not tagged|conflict|tagged when/i.test(line)) this.note('watch log', { line });
    });
    await this.waitFor('watch to start', () => this.watchLog.some((l) => l.includes('watching')), 15_000);
  }

  async #startCodeServer() {
    fs.writeFileSync(path.join(this.tmp, 'code-server.yaml'), '');
    const args = [
      CODE_SERVER, '--auth', 'none', '--bind-addr', '127.0.0.1:0',
      '--config', path.join(this.tmp, 'code-server.yaml'),
      '--user-data-dir', this.userData, '--extensions-dir', path.join(this.tmp, 'extensions'),
      '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--disable-getting-started-override', '--ignore-last-opened', this.proj,
    ];
    // code-server runs on the Node that runs this (24: its native modules were built for it).
    this.codeServer = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const grab = (d) => {
      this.codeServerLog += d;
    };
    this.codeServer.stdout.on('data', grab);
    this.codeServer.stderr.on('data', grab);
    let url;
    await this.waitFor('code-server to listen', () => {
      url = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+\/)/.exec(this.codeServerLog)?.[1];
      return url;
    }, START_DEADLINE_MS);
    return url;
  }

  async #startBrowser(url) {
    // A fresh profile each session (Playwright's persistent context owns --user-data-dir).
    this.browser = await chromium.launchPersistentContext(path.join(this.tmp, 'chromium'), {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1280, height: 800 },
      args: [
        '--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
    });
    this.page = this.browser.pages()[0] ?? (await this.browser.newPage());
    await this.page.goto(`${url}?folder=${encodeURIComponent(this.proj)}`);
    await this.page.waitForSelector('.monaco-workbench .part.statusbar', { timeout: START_DEADLINE_MS });
    await this.waitFor('the explorer to list the project', async () =>
      (await this.page.locator('.explorer-folders-view .monaco-list-row').count()) > 0, START_DEADLINE_MS);
    await this.#watcherReady();
    this.note('VS Code is up');
  }

  /** Waits until VS Code's file watcher reports changes: it starts some seconds after the
   * window, and a file written before that is never reloaded. Files made at the project's top
   * (one a second: an event from before the watcher is lost) show in the Explorer only through
   * it; they are removed again. */
  async #watcherReady() {
    const rows = this.page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'watcher-probe-' });
    const made = [];
    await this.waitFor("VS Code's file watcher", async () => {
      const probe = path.join(this.proj, `watcher-probe-${made.length}.txt`);
      fs.writeFileSync(probe, '');
      made.push(probe);
      await new Promise((r) => setTimeout(r, 1_000));
      return (await rows.count()) > 0;
    }, START_DEADLINE_MS);
    for (const probe of made) fs.rmSync(probe);
    await this.waitFor('the probes to leave the Explorer', async () => (await rows.count()) === 0, START_DEADLINE_MS);
  }

  /** Opens `rel` (a file at the project's top) as a person does: a double click on its name in
   * the Explorer; waits until its editor has the focus and the status bar shows its cursor. */
  async open(rel) {
    const row = this.page.locator('.explorer-folders-view .monaco-list-row', {
      has: this.page.locator('.label-name', { hasText: new RegExp(`^${rel.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) }),
    });
    await row.first().dblclick({ timeout: START_DEADLINE_MS });
    const base = path.basename(rel);
    await this.waitFor(`${rel} to open`, async () => {
      const [tab, focused] = await this.page.evaluate(() => [
        // The label's name and extension are separate elements: no space between them here.
        document.querySelector('.tabs-container .tab.active')?.textContent.replace(/\s/g, ''),
        !!document.activeElement?.closest('.monaco-editor'),
      ]);
      return tab?.includes(base) && focused && (await this.cursor()) !== null;
    }, START_DEADLINE_MS);
    this.file = rel;
    this.note('opened', { file: rel });
  }

  /** Moves the cursor to line:col (1-based) as a person does, with Go to Line (Ctrl+G). */
  async goto(line, col = 1) {
    await this.page.keyboard.press('Control+G');
    await this.page.waitForSelector('.quick-input-widget:not([style*="display: none"]) input', { timeout: 20_000 });
    await this.page.keyboard.type(`${line}:${col}`, { delay: 20 });
    await this.page.keyboard.press('Enter');
    await this.waitFor(`the cursor at ${line}:${col}`, async () => {
      const c = await this.cursor();
      return c && c.line === line && c.col === col;
    }, 10_000);
  }

  /** Types `text` key by key, KEY_DELAY_MS apart ("\n" is Enter). */
  async type(text) {
    this.note('types', { text });
    await this.page.keyboard.type(text, { delay: KEY_DELAY_MS });
    this.note('typed', { cursor: await this.cursor() });
  }

  /** Presses a key (Playwright's names: 'End', 'Enter', 'Control+Z', …). */
  async press(key) {
    this.note('presses', { key });
    await this.page.keyboard.press(key);
  }

  /** Ctrl+S. Whether it saved is for the caller to see (the dirty dot, the disk, a toast). */
  async save() {
    this.note('saves (Ctrl+S)');
    await this.page.keyboard.press('Control+S');
  }

  /** A person's pause (thinking, reading): real time passes, nothing is pressed. */
  async pause(ms) {
    this.note('pauses', { ms });
    await new Promise((r) => setTimeout(r, ms));
  }

  /** Clicks the button `label` ('Overwrite', 'Compare', …) of the toast matching `re`. */
  async clickToastButton(re, label) {
    const toast = this.page.locator('.notifications-toasts .notification-toast', { hasText: re }).first();
    await toast.getByRole('button', { name: label }).click();
    this.note('clicks', { button: label });
  }

  /** `filewatch-mcp resolve ID` in the project, as Claude's resolve_ask or a user does. */
  resolve(id) {
    const r = spawnSync(BIN, ['resolve', id], { cwd: this.proj, env: this.env, encoding: 'utf8' });
    this.note('filewatch-mcp resolve', { id, status: r.status, stderr: r.stderr.trim() });
    return r;
  }

  /** The status bar's `Ln N, Col M` as {line, col}, or null when no editor shows it. */
  async cursor() {
    const text = await this.page.evaluate(() => {
      const items = [...document.querySelectorAll('.part.statusbar .statusbar-item')];
      return items.map((i) => i.textContent.trim()).find((t) => /^Ln \d+, Col \d+/.test(t)) ?? null;
    });
    const m = text && /^Ln (\d+), Col (\d+)/.exec(text);
    return m ? { line: +m[1], col: +m[2] } : null;
  }

  /** What the person sees: the editor's visible lines, the active tab's dirty dot, the cursor,
   * and the notification toasts on screen (their text, buttons included). */
  async state() {
    const seen = await this.page.evaluate(() => {
      const editor = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
      const rows = editor ? [...editor.querySelectorAll('.view-line')] : [];
      const lines = rows
        .map((r) => ({ top: parseFloat(r.style.top) || 0, text: r.textContent.replace(/\u00a0/g, ' ') }))
        .sort((a, b) => a.top - b.top)
        .map((r) => r.text);
      const tab = document.querySelector('.editor-group-container.active .tabs-container .tab.active');
      const toasts = [...document.querySelectorAll('.notifications-toasts .notification-toast')]
        .map((t) => t.innerText.replace(/\s+/g, ' ').trim())
        .filter(Boolean);
      return { lines, dirty: !!tab?.classList.contains('dirty'), toasts };
    });
    return { ...seen, cursor: await this.cursor() };
  }

  /** The file's text on disk now. */
  disk(rel = this.file) {
    try {
      return fs.readFileSync(path.join(this.proj, rel), 'utf8');
    } catch {
      return null;
    }
  }

  /** Writes `text` into the file as another program would (in place), and returns its stat
   * before and after. `keepMtime`: then sets the modification time back to what it was. */
  writeDisk(text, { rel = this.file, keepMtime = false } = {}) {
    const p = path.join(this.proj, rel);
    const before = fs.statSync(p);
    fs.writeFileSync(p, text);
    if (keepMtime) fs.utimesSync(p, before.atime, before.mtime); // ms precision: never later
    const after = fs.statSync(p);
    this.note('another program wrote the file', { keepMtime, mtimeBefore: before.mtimeMs, mtimeAfter: after.mtimeMs, text });
    return { before, after };
  }

  /** The files under VS Code's user-data folder (hot-exit backups and the like), relative. VS Code
   * deletes files there while we list: one gone between the listing and its stat is not there. */
  userDataFiles() {
    for (;;) {
      try {
        return fs
          .readdirSync(this.userData, { recursive: true })
          .filter((f) => fs.statSync(path.join(this.userData, f), { throwIfNoEntry: false })?.isFile());
      } catch (e) {
        if (e.code !== 'ENOENT') throw e; // a folder gone mid-walk: list again
      }
    }
  }

  /** Polls `cond` every 50 ms until it is truthy or `ms` pass (then throws, saying `what`). */
  async waitFor(what, cond, ms) {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await cond();
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async screenshot(label) {
    const file = path.join(this.out, `${String(this.timeline.length).padStart(3, '0')}-${label}.png`);
    await this.page.screenshot({ path: file }).catch(() => {});
    this.note('screenshot', { file: path.basename(file) });
    return file;
  }

  /** Samples the editor and the disk every SAMPLE_MS into the timeline, change by change: the
   * toasts (each distinct text also in toastsSeen), the dirty dot, the cursor, the disk. */
  #sample() {
    let last = {};
    const tick = async () => {
      if (this.closed) return;
      try {
        const st = await this.state();
        const disk = this.file ? this.disk() : null;
        for (const t of st.toasts) {
          if (!this.toastsSeen.some((s) => s.text === t)) {
            this.toastsSeen.push({ at: this.now(), text: t });
            this.note('toast', { text: t });
          }
        }
        if (st.dirty !== last.dirty) this.note(st.dirty ? 'tab dirty' : 'tab clean');
        if (JSON.stringify(st.cursor) !== JSON.stringify(last.cursor)) this.timeline.push({ at: this.now(), what: 'cursor', ...st.cursor });
        if (disk !== last.disk && this.file) this.note('disk', { text: disk });
        last = { ...st, disk };
      } catch {
        // the page is going away
      }
      this.sampler = setTimeout(tick, SAMPLE_MS);
    };
    tick();
  }

  /** Stops everything and writes artifacts/<name>/timeline.json. */
  async close() {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.sampler);
    if (this.page) await this.screenshot('end').catch(() => {});
    await this.browser?.close().catch(() => {});
    if (this.codeServer && this.codeServer.exitCode === null) {
      try {
        process.kill(-this.codeServer.pid, 'SIGTERM'); // its extension hosts and file watchers too
      } catch {}
    }
    if (this.watch && this.watch.exitCode === null) this.watch.kill('SIGTERM');
    if (this.watch) await Promise.race([this.watchExit, new Promise((r) => setTimeout(r, 5000))]);
    fs.writeFileSync(path.join(this.out, 'timeline.json'), JSON.stringify({
      name: this.name, asks: this.asks, toastsSeen: this.toastsSeen, timeline: this.timeline,
    }, null, 1));
    fs.writeFileSync(path.join(this.out, 'watch.log'), this.watchLog.join('\n'));
    fs.writeFileSync(path.join(this.out, 'code-server.log'), this.codeServerLog);
    if (!process.env.FW_VSCODE_KEEP) fs.rmSync(this.tmp, { recursive: true, force: true });
  }
}

function lines(stream, each) {
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim()) each(line);
    }
  });
}
