#!/usr/bin/env bash
# links_test.sh: every relative link in the repository's Markdown resolves to a file or folder
# that exists (README.md, docs/*.md, every folder's README and the other .md pages; links inside
# fenced code blocks and to http(s) addresses are not checked, nor #anchors).
# Usage: tests/docs/links_test.sh            (from the repository root)
#        bazel test //tests/docs:links_test   (finds the source tree through README.md's link;
#        tagged external: never cached, since it reads files that are not its inputs)
set -euo pipefail
if [ $# -ge 1 ]; then
  # Under Bazel: $1 is README.md in the runfiles, a link into the source tree; check that tree.
  root=$(dirname "$(readlink -f "$1")")
else
  root=$(cd "$(dirname "$0")/../.." && pwd)
fi
[ -f "$root/WORKSPACE" ] || { echo "links_test: no WORKSPACE at $root" >&2; exit 1; }
python3 - "$root" <<'PY'
import os, re, sys
root = sys.argv[1]
link = re.compile(r'\]\(([^)\s]+)\)')
bad = checked = 0
for dirpath, dirs, files in os.walk(root):
    dirs[:] = [d for d in dirs if not d.startswith(('.', 'bazel-')) and d != 'out']
    for f in files:
        if not f.endswith('.md'):
            continue
        path = os.path.join(dirpath, f)
        fence = False
        for n, line in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
            if line.lstrip().startswith('```'):
                fence = not fence
                continue
            if fence:
                continue
            for target in link.findall(line):
                if re.match(r'[a-z]+:', target) or target.startswith('#'):
                    continue
                target = target.split('#')[0]
                checked += 1
                if not os.path.exists(os.path.normpath(os.path.join(dirpath, target))):
                    print(f"links_test: {os.path.relpath(path, root)}:{n}: broken link '{target}'")
                    bad += 1
print(f"links_test: {checked} relative links checked, {bad} broken")
sys.exit(1 if bad else 0)
PY
