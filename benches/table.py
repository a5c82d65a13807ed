#!/usr/bin/env python3
"""Prints the scan benchmark as a Markdown table from criterion's estimates (run after
`cargo bench --bench scan`)."""
import json, pathlib, sys

root = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"

def est(lang, fn, case):
    p = root / lang / fn / case / "new" / "estimates.json"
    bench = root / lang / fn / case / "new" / "benchmark.json"
    if not p.exists():
        return None, None
    ns = json.loads(p.read_text())["median"]["point_estimate"]
    size = json.loads(bench.read_text())["throughput"]["Bytes"]
    return ns, size

print("| language | KB | memmem MB/s | scan, no trigger MB/s | ratio | KB with markers | scan, markers MB/s | µs per file |")
print("|---|---|---|---|---|---|---|---|")
for d in sorted(p for p in root.iterdir() if (p / "scan").is_dir()):
    lang = d.name
    m, size = est(lang, "memmem", "clean")
    s, _ = est(lang, "scan", "clean")
    k, msize = est(lang, "scan", "markers")
    if None in (m, s, k):
        continue
    mbs = lambda ns, n: n / (ns / 1e9) / 1e6
    print(f"| {lang} | {size//1024} | {mbs(m,size):,.0f} | {mbs(s,size):,.0f} | {s/m:.2f}x | {msize//1024} | {mbs(k,msize):,.1f} | {k/1000:,.0f} |")
