#!/usr/bin/env python3
"""Keep the sections of thunder-kit output files that castscope's tests compare against.

    python3 tests/oracle/extract.py OUTDIR FILE.txt...

A thunder-kit file (../shared/thunder-kit/README.md) is a header of `#` lines (the Thunder
commit, the jit call, the inputs, every region of the fused joint and final traces, the
function's source) and then every trace of the pipeline, each opened by a line
`# ===== [i] <what> [TAG]: <provenance>`.  This writes OUTDIR/<name> with the header and only
the sections tagged INITIAL, GRAD JOINT, FUSED JOINT, FINAL FORWARD and FINAL BACKWARD, plus the
nvFuser fusion_pass steps 1 (regions formed), 2 (rematerialize), 3 (remove_redundant_casts) and
4 (nvFuserExecutor.cse), unchanged.
"""
import os
import re
import sys

KEEP_TAGS = ('[INITIAL]', '[GRAD JOINT]', '[FUSED JOINT]', '[FINAL FORWARD]', '[FINAL BACKWARD]')
KEEP_STEPS = ('fusion_pass step 1:', 'fusion_pass step 2:', 'fusion_pass step 3:', 'fusion_pass step 4:')
SECTION = re.compile(r'^# ===== \[\d+\] ')


def keep(opening):
    return any(t in opening for t in KEEP_TAGS) or any(s in opening for s in KEEP_STEPS)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    for path in argv[2:]:
        out, on = [], True
        with open(path) as f:
            for line in f:
                if SECTION.match(line):
                    on = keep(line)
                if on:
                    out.append(line)
        with open(os.path.join(outdir, os.path.basename(path)), 'w') as f:
            f.writelines(out)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
