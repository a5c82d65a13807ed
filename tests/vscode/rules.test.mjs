// VS Code's own rules for a file that another program writes while it is open — what a design
// for filewatch-mcp's writes (issue 34) stands on — checked in the real VS Code that the
// scenarios use (code-server 4.139.1 = VS Code 1.139.1), with no filewatch-mcp: another program
// here is this test writing the file. docs/editors.md#vs-code says why each rule holds (from
// VS Code's sources). If an upgrade of code-server breaks one, the design must be looked at again.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CONFLICT, Session } from './harness.mjs';

const TIMEOUT = 240_000;
const FILE = 'import json\n\ndef total(items):\n    return sum(items)\n# @claude why?\nprint(total([1]))\n';
const TAGGED = FILE.replace('@claude why', '@claude[fw-00000001] why');
const ASK_LINE = 5; // "# @claude why?", 14 characters
const SETTLE_MS = 3_000; // long enough for VS Code to have seen a write (it takes ~0.1-0.5 s)

/** The buffer as VS Code shows it (the file is short: every line is visible). */
async function buffer(s) {
  return (await s.state()).lines.join('\n');
}

/** Waits until VS Code has saved `text`: on disk AND the tab clean. The bytes land before VS Code
 * stats the file it wrote; a write of ours in between would become the stat VS Code keeps (and,
 * with the mtime put back, look like its own save: no reload), so the next write waits for both. */
async function seeSaved(s, text, what = 'the save') {
  await s.waitFor(what, async () => s.disk() === text && !(await s.state()).dirty, 10_000);
}

/** Writes `text` and waits until VS Code's buffer shows it: returns the milliseconds taken. */
async function writeAndSeeReload(s, text, opts) {
  const t = Date.now();
  s.writeDisk(text, opts);
  await s.waitFor('VS Code to reload the buffer', async () => (await buffer(s)) === text, 10_000);
  return Date.now() - t;
}

async function withSession(opts, body) {
  const s = await Session.start({ watchArgs: null, files: { 'app.py': FILE }, ...opts });
  try {
    await s.open('app.py');
    await body(s);
  } finally {
    await s.close();
  }
}

describe('VS Code 1.139 with a file written under it (no filewatch-mcp)', { concurrency: false }, () => {
  test('a clean buffer reloads; a cursor on a changed line goes to the next line, elsewhere it stays', { timeout: TIMEOUT }, async () => {
    await withSession({ name: 'rule-clean-reload' }, async (s) => {
      const seen = [];
      // The cursor at the end of the ask line: the reload replaces lines 5..6 and moves it.
      await s.goto(ASK_LINE, 15);
      seen.push(await writeAndSeeReload(s, TAGGED));
      assert.deepEqual(await s.cursor(), { line: ASK_LINE + 1, col: 1 }, 'end of the changed line -> next line');
      assert.equal((await s.state()).dirty, false, 'a reload leaves the buffer clean');

      // Mid-line: the same.
      seen.push(await writeAndSeeReload(s, FILE));
      await s.goto(ASK_LINE, 5);
      seen.push(await writeAndSeeReload(s, TAGGED));
      assert.deepEqual(await s.cursor(), { line: ASK_LINE + 1, col: 1 }, 'middle of the changed line -> next line');

      // On a line the write did not change: it stays.
      seen.push(await writeAndSeeReload(s, FILE));
      await s.goto(3, 5);
      seen.push(await writeAndSeeReload(s, TAGGED));
      assert.deepEqual(await s.cursor(), { line: 3, col: 5 }, 'an unchanged line keeps its cursor');
      s.note('reload latencies (ms)', { seen });

      // The reload is an undoable edit: Ctrl+Z takes the tag out of the buffer, which is dirty
      // again; Ctrl+S then writes it without the tag and no conflict (its stat is the reload's).
      await s.goto(ASK_LINE, 15);
      await s.press('Control+Z');
      await s.waitFor('the undo', async () => (await buffer(s)) === FILE, 5_000);
      assert.equal((await s.state()).dirty, true, 'the undone reload is an unsaved change');
      await s.save();
      await s.waitFor('the save', () => s.disk() === FILE, 5_000);
      assert.deepEqual(s.toastsSeen.filter((t) => CONFLICT.test(t.text)), []);
    });
  });

  test('the last line without a newline: a cursor at its end stays at the end', { timeout: TIMEOUT }, async () => {
    const last = 'x = 1\n# @claude why?';
    await withSession({ name: 'rule-last-line', files: { 'app.py': last } }, async (s) => {
      await s.goto(2, 15);
      await writeAndSeeReload(s, last.replace('@claude', '@claude[fw-00000001]'));
      assert.deepEqual(await s.cursor(), { line: 2, col: 28 }, 'no common suffix: replaced to the end, cursor at the end');
    });
  });

  test('a dirty buffer: no reload; a save conflicts iff the file is newer AND its size differs', { timeout: TIMEOUT }, async () => {
    await withSession({ name: 'rule-dirty' }, async (s) => {
      const conflicts = () => s.toastsSeen.filter((t) => CONFLICT.test(t.text)).length;
      // Newer mtime, other size: no reload while dirty; Ctrl+S -> conflict.
      await s.goto(7, 1);
      await s.type('y = 2');
      let mine = FILE + 'y = 2';
      s.writeDisk(TAGGED);
      await s.pause(SETTLE_MS);
      assert.equal(await buffer(s), mine, 'a dirty buffer is not reloaded');
      await s.save();
      await s.waitFor('the conflict toast', () => conflicts() === 1, 10_000);
      assert.equal(s.disk(), TAGGED, 'the refused save wrote nothing');
      await s.clickToastButton(CONFLICT, 'Overwrite');
      await seeSaved(s, mine, 'Overwrite to write the buffer');

      // Newer mtime, the size VS Code last saved: the save goes through, and the other
      // program's change is lost without a word.
      await s.type(' # z');
      const other = mine.replace('why?', 'how?'); // the size on disk stays
      mine += ' # z';
      s.writeDisk(other);
      await s.pause(SETTLE_MS);
      await s.save();
      await seeSaved(s, mine);
      assert.equal(conflicts(), 1, 'no second conflict: same size, so the same etag');

      // Other size, but the modification time put back: no conflict either, the change is lost.
      await s.type(' # w');
      s.writeDisk(mine.replace('@claude', '@claude[fw-00000002]'), { keepMtime: true });
      mine += ' # w';
      await s.pause(SETTLE_MS);
      assert.equal(await buffer(s), mine, 'dirty: no reload');
      await s.save();
      await seeSaved(s, mine);
      assert.equal(conflicts(), 1, 'no conflict: the file is not newer than VS Code last saw it');

      // Clean, other size, the mtime put back: reloaded (the size changes the etag).
      const tagged = mine.replace('@claude', '@claude[fw-00000003]');
      const ms = await writeAndSeeReload(s, tagged, { keepMtime: true });
      s.note('reload of an mtime-kept write (ms)', { ms });

      // Clean, same size, the mtime put back: the etag is the same, VS Code keeps its stale text.
      const same = tagged.replace('why?', 'how?');
      s.writeDisk(same, { keepMtime: true });
      await s.pause(SETTLE_MS);
      assert.equal(await buffer(s), tagged, 'not reloaded: same mtime and size');
      assert.equal(conflicts(), 1);
    });
  });

  test('autosave after a conflict: VS Code stops saving the file until Ctrl+S', { timeout: TIMEOUT }, async () => {
    await withSession({ name: 'rule-autosave-conflict', autosave: 1000 }, async (s) => {
      await s.goto(7, 1);
      await s.type('y = 2');
      await s.waitFor('the autosave', () => s.disk() === FILE + 'y = 2', 10_000);
      await s.type(' + 1');
      s.writeDisk(TAGGED); // while the buffer holds unsaved typing
      await s.waitFor('the conflict toast', () => s.toastsSeen.some((t) => CONFLICT.test(t.text)), 10_000);
      await s.type(' + 1');
      await s.pause(SETTLE_MS); // three autosave delays
      assert.equal(s.disk(), TAGGED, 'no autosave after the conflict');
      assert.equal(await buffer(s), FILE + 'y = 2 + 1 + 1');
    });
  });

  test('hot exit: a dirty buffer is backed up under the user-data folder, and the backup goes at save', { timeout: TIMEOUT }, async () => {
    await withSession({ name: 'rule-backup' }, async (s) => {
      const backups = () => s.userDataFiles().filter((f) => f.includes('Backups/'));
      const before = backups();
      await s.goto(7, 1);
      const t = Date.now();
      await s.type('y');
      const found = await s.waitFor('a backup', () => {
        const b = backups().filter((f) => !before.includes(f));
        return b.length ? b : null;
      }, 10_000);
      s.note('backup', { files: found, msAfterKey: Date.now() - t });
      await s.save();
      await s.waitFor('the backup to go', () => backups().filter((f) => !before.includes(f)).length === 0, 10_000);
    });
  });
});
