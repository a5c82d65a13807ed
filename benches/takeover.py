#!/usr/bin/env python3
"""Two real servers on one root (two Claude Code sessions in one repository): the standby's CPU
while it waits, and how soon it takes over when the owner ends (`kill` = SIGKILL, `eof` = its
client closes stdin), with a save made at that moment. Linux (/proc). Usage, after `cargo build`:
`python3 benches/takeover.py kill 20` (FILEWATCH_BIN picks another binary)."""
import json, os, pathlib, shutil, subprocess, sys, tempfile, threading, time, queue
BIN = os.environ.get("FILEWATCH_BIN") or str(
    pathlib.Path(__file__).resolve().parent.parent / "target" / "debug" / "filewatch-mcp")
INIT = [
 '{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{}}',
 '{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1.332"}},"jsonrpc":"2.0","id":0}',
 '{"method":"notifications/initialized","jsonrpc":"2.0"}',
]
def start(root, state):
    p = subprocess.Popen([BIN, "--root", root, "--debounce", "100ms"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=dict(os.environ, FILEWATCH_STATE_DIR=state))
    q = queue.Queue()
    def rd():
        for line in p.stdout: q.put((time.monotonic(), json.loads(line)))
    threading.Thread(target=rd, daemon=True).start()
    for l in INIT: p.stdin.write((l + "\n").encode()); p.stdin.flush()
    return p, q
def wait(q, pred, t=10):
    end = time.monotonic() + t
    while True:
        at, v = q.get(timeout=end - time.monotonic())
        if pred(v): return at, v
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return int(f[11]) + int(f[12])  # utime + stime, clock ticks
how = sys.argv[1]
runs = int(sys.argv[2])
notice_ms, ask_ms = [], []
for i in range(runs):
    root = tempfile.mkdtemp(); state = tempfile.mkdtemp()
    a, qa = start(root, state); wait(qa, lambda v: v.get("id") == 0)
    b, qb = start(root, state); wait(qb, lambda v: v.get("params", {}).get("meta", {}).get("notice") == "standby")
    if i == 0:
        c0 = cpu(b.pid); time.sleep(10); c1 = cpu(b.pid)
        print(f"standby idle: {c1 - c0} clock ticks of CPU in 10 s (tick = 1/{os.sysconf('SC_CLK_TCK')} s)")
    t0 = time.monotonic()
    if how == "kill": a.kill()
    else: a.stdin.close()
    open(os.path.join(root, "c.py"), "w").write("# @claude saved as the owner went\n")
    tn, _ = wait(qb, lambda v: v.get("params", {}).get("meta", {}).get("notice") == "owner")
    ta, _ = wait(qb, lambda v: v.get("params", {}).get("meta", {}).get("file") == "c.py")
    notice_ms.append((tn - t0) * 1000); ask_ms.append((ta - t0) * 1000)
    a.wait(); b.kill(); b.wait()
    shutil.rmtree(root); shutil.rmtree(state)
notice_ms.sort(); ask_ms.sort()
print(f"{how}: {runs} runs; takeover notice after median {notice_ms[runs//2]:.0f} ms (max {notice_ms[-1]:.0f}); "
      f"the save made at the kill announced by the new owner after median {ask_ms[runs//2]:.0f} ms (max {ask_ms[-1]:.0f}), debounce 100 ms")
