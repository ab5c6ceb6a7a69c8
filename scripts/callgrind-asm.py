#!/usr/bin/env python3
"""Per-instruction costs of a callgrind run, joined with the binary's disassembly.

Usage:
  BENCHES_COUNT_CELL="cf-hybrid serialize 2x2048 1024" \\
    valgrind --tool=callgrind --dump-instr=yes --dump-line=no --callgrind-out-file=cg.out \\
      --toggle-collect='*as benches::Lib>::serialize' target/release/count
  scripts/callgrind-asm.py cg.out target/release/count 1024   # divide by the messages

Prints every executed instruction of the collected range with its count (divided by the
optional third argument), in address order, with the enclosing symbols: what the
per-message instructions of docs/performance.md were read from.
"""
import collections
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, binary = sys.argv[1], sys.argv[2]
    div = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    ir = collections.Counter()
    addr = 0
    in_call = False
    for line in open(out):
        line = line.rstrip("\n")
        if line.startswith("calls="):
            # The next cost line is the call's inclusive cost, not the instruction's own.
            in_call = True
            continue
        m = re.match(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s+(\d+)", line)
        if m:
            a = m.group(1)
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a != "*":
                addr += int(a)
            if in_call:
                in_call = False
                continue
            ir[addr] += int(m.group(2))
        elif in_call:
            in_call = False
    if not ir:
        sys.exit("no instruction costs in %s (run callgrind with --dump-instr=yes --dump-line=no)" % out)
    lo, hi = min(ir), max(ir)
    dis = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C",
         "--start-address=%d" % lo, "--stop-address=%d" % (hi + 16), binary],
        capture_output=True, text=True, check=True).stdout
    for l in dis.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(.*)", l)
        if m:
            a = int(m.group(1), 16)
            if a in ir:
                print("%8.2f  %x  %s" % (ir[a] / div, a, m.group(2)))
        elif l.strip().endswith(":"):
            print(l)


if __name__ == "__main__":
    main()
