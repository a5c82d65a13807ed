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
for d in sorted(p for p in root.iterdir() if (p / "scan").is_dir() and not p.name.startswith("errors-")):
    lang = d.name
    m, size = est(lang, "memmem", "clean")
    s, _ = est(lang, "scan", "clean")
    k, msize = est(lang, "scan", "markers")
    if None in (m, s, k):
        continue
    mbs = lambda ns, n: n / (ns / 1e9) / 1e6
    print(f"| {lang} | {size//1024} | {mbs(m,size):,.0f} | {mbs(s,size):,.0f} | {s/m:.2f}x | {msize//1024} | {mbs(k,msize):,.1f} | {k/1000:,.0f} |")

# Next to syntax errors (thread CPU time): a syntax error with a trailing ask every 500 lines.
print()
print("| language | scan, markers ms | scan, near errors ms | ratio | parse ratio | scanner's own ms, markers → near errors |")
print("|---|---|---|---|---|---|")
for d in sorted(p for p in root.iterdir() if p.name.startswith("errors-")):
    lang = d.name[len("errors-"):]
    k, _ = est(d.name, "scan", "markers")
    e, _ = est(d.name, "scan", "near-errors")
    pk, _ = est(d.name, "parse", "markers")
    pe, _ = est(d.name, "parse", "near-errors")
    if None in (k, e, pk, pe):
        continue
    ms = lambda ns: ns / 1e6
    print(f"| {lang} | {ms(k):.2f} | {ms(e):.2f} | {e/k:.2f}x | {pe/pk:.2f}x | {ms(k-pk):.2f} → {ms(e-pe):.2f} |")
