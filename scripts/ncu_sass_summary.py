#!/usr/bin/env python3
"""Summarise an ncu SASS source page: instructions and stall samples per opcode, hottest lines.

Input: the CSV of `ncu --section SourceCounters --page source --print-source sass --csv ...`
(one kernel). Usage: ncu_sass_summary.py FILE.csv [n_opcodes=30] [n_lines=30]

"per unit" divides by the execution count of the most executed line (e.g. one loop iteration
of one warp): instructions per iteration of the hottest loop.
"""
import collections
import csv
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = open(sys.argv[1]).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"')), None)
    if start is None:
        sys.exit(f"{sys.argv[1]}: no ncu source table (a line starting with \"Address\")")
    rows = list(csv.reader(lines[start:]))
    hdr, rows = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    i_src = hdr.index("Source")
    i_smp = hdr.index("Warp Stall Sampling (All Samples)")
    i_exe = hdr.index("Instructions Executed")
    n_ops = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    n_hot = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    total = sum(int(r[i_exe]) for r in rows)
    samples = max(1, sum(int(r[i_smp]) for r in rows))
    unit = max(1, max(int(r[i_exe]) for r in rows))
    print(f"{total} warp instructions, {samples} stall samples, {total / unit:.1f} per unit")
    inst, smp = collections.Counter(), collections.Counter()
    for r in rows:
        words = r[i_src].split()
        op = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
        inst[op] += int(r[i_exe])
        smp[op] += int(r[i_smp])
    print("| opcode | per unit | % of instructions | % of stall samples |")
    print("| --- | ---: | ---: | ---: |")
    for op, n in inst.most_common(n_ops):
        print(f"| {op} | {n / unit:.1f} | {100 * n / total:.2f} | {100 * smp[op] / samples:.2f} |")
    print("\nhottest lines (samples, executions):")
    for r in sorted(rows, key=lambda r: -int(r[i_smp]))[:n_hot]:
        print(f"{r[0][-6:]} {r[i_src].strip()[:72]:72s} {r[i_smp]:>6} {r[i_exe]:>10}")


if __name__ == "__main__":
    main()
