#!/usr/bin/env python3
"""`filewatch-mcp scan TREE` side by side with `rg -l @claude TREE`: wall time, CPU (user +
system) and peak RSS, medians over alternating runs on a warm cache, and their ratios.

    benches/scan_vs_rg.py [--runs N] [--bin PATH] [TREE ...]

With no TREE it generates the synthetic tree of `benches/watch.rs` (100k files of two lines in
10k directories, a git repository) in $TMPDIR/filewatch-scan-tree100k, once, and measures that.
The binary defaults to target/release/filewatch-mcp (`cargo build --release` first). Runs
alternate (rg, scan, rg, scan, ...) so a busy machine's load falls on both alike. Each process is
timed from spawn to exit with `os.wait4`, which also gives its CPU and peak RSS. Exit status 0
(all measured), 2 (rg or the binary missing).

Apples to apples: both honour .gitignore/.ignore the same way (ripgrep's `ignore` crate); the
walk lists the same files except our hard excludes (node_modules, target, build, dist, .venv,
*.lock, *.swp, *.tmp: see src/walk.rs). The file counts of both are printed, so a tree where they
differ shows it.
"""
import argparse, os, pathlib, shutil, statistics, subprocess, sys, tempfile, time

REPO = pathlib.Path(__file__).resolve().parent.parent
TIME = "/usr/bin/time"  # GNU time (Debian `time`)


def synthetic_tree():
    root = pathlib.Path(tempfile.gettempdir()) / "filewatch-scan-tree100k"
    done = root.with_name(root.name + ".done")  # outside: the tree stays as watch.rs makes it
    if done.exists():
        return root
    print(f"generating 100,000 files in 10,100 directories under {root} ...", file=sys.stderr)
    for a in range(100):
        for b in range(100):
            d = root / f"pkg{a:02}" / f"mod{b:02}"
            d.mkdir(parents=True, exist_ok=True)
            for f in range(10):
                (d / f"f{f}.py").write_text("def f():\n    return 1\n")
    subprocess.run(["git", "-C", str(root), "init", "-q"], check=False)
    done.write_text("")
    return root


def run_once(argv):
    """Wall seconds, CPU seconds, peak RSS KiB, exit code of one run of `argv`.

    The peak RSS is GNU time's (`%M`): `ru_maxrss` of a process forked straight from this
    Python interpreter would count the interpreter's pages the fork copied. CPU comes from
    `wait4` on `time`, which includes the command it waited for (and time's own ~1 ms, as for
    both commands)."""
    with tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [TIME, "-f", "%M %x", "-o", rss.name, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        maxrss, code = rss.read().split()[-2:]
    return wall, usage.ru_utime + usage.ru_stime, int(maxrss), int(code)


def file_counts(rg, binary, tree):
    listed = subprocess.run([rg, "--files", str(tree)], capture_output=True, text=True)
    ours = subprocess.run(
        [binary, "--log-level", "debug", "scan", str(tree)], capture_output=True, text=True
    )
    scanned = next(
        (l.split(" files read")[0].split()[-1] for l in ours.stderr.splitlines() if " files read" in l),
        "?",
    )
    return len(listed.stdout.splitlines()), scanned


def measure(rg, binary, tree, runs):
    cmds = {"rg": [rg, "-l", "@claude", str(tree)], "scan": [binary, "scan", str(tree)]}
    for argv in cmds.values():  # warm the cache, and check they run
        for _ in range(2):
            code = run_once(argv)[3]
            if code not in (0, 1):
                sys.exit(f"{' '.join(argv)} exited {code}")
    samples = {name: [] for name in cmds}
    for _ in range(runs):
        for name, argv in cmds.items():
            samples[name].append(run_once(argv)[:3])
    med = {
        name: [statistics.median(s[i] for s in runs_) for i in range(3)]
        for name, runs_ in samples.items()
    }
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "filewatch-mcp"))
    ap.add_argument("trees", nargs="*")
    args = ap.parse_args()
    rg = shutil.which("rg")
    if rg is None or not os.access(args.bin, os.X_OK) or not os.access(TIME, os.X_OK):
        sys.exit(
            f"needs rg and {TIME} (apt-get install ripgrep time) and {args.bin} "
            "(cargo build --release)"
        )
    trees = [pathlib.Path(t) for t in args.trees] or [synthetic_tree()]
    print(f"{args.runs} alternating runs each, medians; CPU = user + system; RSS = peak")
    print("| tree | files (rg / scan) | rg wall ms | scan wall ms | wall ratio "
          "| rg CPU ms | scan CPU ms | CPU ratio | rg RSS MiB | scan RSS MiB | RSS ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tree in trees:
        listed, scanned = file_counts(rg, args.bin, tree)
        m = measure(rg, args.bin, tree, args.runs)
        (rw, rc, rr), (sw, sc, sr) = m["rg"], m["scan"]
        print(
            f"| {tree} | {listed} / {scanned} | {rw*1e3:.0f} | {sw*1e3:.0f} | {sw/rw:.2f}x "
            f"| {rc*1e3:.0f} | {sc*1e3:.0f} | {sc/rc:.2f}x "
            f"| {rr/1024:.1f} | {sr/1024:.1f} | {sr/rr:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
