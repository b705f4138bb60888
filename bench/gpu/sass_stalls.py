#!/usr/bin/env python3
"""Where a kernel's warps waited, from Nsight Compute's per-instruction warp-state samples:
the source page of a report taken with `--section SourceCounters --warp-sampling-interval 0`,
exported as `ncu --import R.ncu-rep --page source --csv --print-source sass`
(scripts/gpu-profile.sh does both with SASS=1). Prints, per file, the samples by stall
reason, the constant-bank lines the kernel reads in program order (a warp stalls on the
first read of each 64-byte line: `imc`), and the instructions that hold the most samples.

    sass_stalls.py SOURCE.csv ... [--top 12] [--json OUT.json]
"""
import argparse
import csv
import json
import re
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
CONSTANT = re.compile(r"c\[0x0\]\[(0x[0-9a-f]+)\]")


def read(path):
    """The kernel's name and its instruction rows (dicts of the page's columns)."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        sys.exit("sass_stalls: %s: %s" % (path, e.strerror))
    # ncu writes "Kernel Name",<name> and then the table; its own notes may come first.
    for i, row in enumerate(rows):
        if row and row[0] == "Kernel Name" and i + 1 < len(rows) and SAMPLES in rows[i + 1]:
            header = rows[i + 1]
            body = [dict(zip(header, r)) for r in rows[i + 2:] if len(r) == len(header)]
            if not body:
                break
            return (row[1] if len(row) > 1 else "?"), body
    sys.exit("sass_stalls: %s: no source table with \"%s\" (export it with --page source --csv "
             "--print-source sass from a report with the SourceCounters section)" % (path, SAMPLES))


def number(text):
    try:
        return int(text.replace(",", "")) if text else 0
    except ValueError:
        return 0


def summarize(path, top):
    kernel, rows = read(path)
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(number(r[SAMPLES]) for r in rows)
    by_reason = {c[len("stall_"):]: sum(number(r[c]) for r in rows) for c in reasons}
    lines, seen = [], set()
    for index, r in enumerate(rows):
        for offset in CONSTANT.findall(r["Source"]):
            line = int(offset, 16) // 64 * 64
            if line not in seen:
                seen.add(line)
                lines.append({"line": "0x%03x" % line, "first_read": offset, "instruction": index,
                              "imc_samples": number(r.get("stall_imc", ""))})
    hot = sorted(range(len(rows)), key=lambda i: -number(rows[i][SAMPLES]))[:top]
    hot_rows = []
    for i in sorted(hot):
        r = rows[i]
        reason = max(reasons, key=lambda c: number(r[c])) if reasons else ""
        hot_rows.append({"instruction": i, "source": r["Source"].strip(), "samples": number(r[SAMPLES]),
                         "reason": reason[len("stall_"):]})
    return {"file": path, "kernel": kernel, "instructions": len(rows), "samples": total,
            "by_reason": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])), "constant_lines": lines,
            "hot": hot_rows}


def share(part, total):
    return "%.1f%%" % (100.0 * part / total) if total else "-"


def print_summary(s):
    print("%s: %s" % (s["file"], s["kernel"]))
    print("%d instructions, %d samples\n" % (s["instructions"], s["samples"]))
    print("| stall reason | samples | share |\n| --- | --- | --- |")
    for reason, n in s["by_reason"].items():
        if n:
            print("| %s | %d | %s |" % (reason, n, share(n, s["samples"])))
    print("\n| constant line | first read | at instruction | imc samples there |\n| --- | --- | --- | --- |")
    for c in s["constant_lines"]:
        print("| %s | %s | %d | %d |" % (c["line"], c["first_read"], c["instruction"], c["imc_samples"]))
    print("\n| instruction | samples | most samples waiting on | source |\n| --- | --- | --- | --- |")
    for h in s["hot"]:
        print("| %d | %d | %s | `%s` |" % (h["instruction"], h["samples"], h["reason"], h["source"]))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.top < 1:
        sys.exit("sass_stalls: --top must be at least 1")
    summaries = [summarize(p, args.top) for p in args.csv]
    for s in summaries:
        print_summary(s)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=1)


if __name__ == "__main__":
    main()
