"""links.py: every relative link of the given Markdown files must resolve.

links.py ROOT FILE.md...: for each [text](target) outside code blocks and code spans whose
target is not a URL, the file or folder target (relative to the page) must exist under ROOT, and
a #anchor must name a heading of the target page (GitHub's rule: lower case, punctuation but
'-' and '_' dropped, spaces as '-'). Prints one line per broken link; exit 1 if any."""
import os
import re
import sys


def anchors(path):
    out, fence = set(), False
    for ln in open(path, encoding="utf-8"):
        if ln.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6} (.*)", ln)
        if m:
            h = m.group(1).strip().lower().replace("`", "")
            out.add(re.sub(r"[^\w\- ]", "", h).replace(" ", "-"))
    return out


def links(path):
    fence = False
    for n, ln in enumerate(open(path, encoding="utf-8"), 1):
        if ln.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        ln = re.sub(r"`[^`]*`", "", ln)
        for m in re.finditer(r"\]\(([^)\s]+)\)", ln):
            yield n, m.group(1)


def main():
    root, files = sys.argv[1], sys.argv[2:]
    bad = 0
    for rel in files:
        page = os.path.join(root, rel)
        for n, target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                print(f"{rel}:{n}: {target}: no such file")
                bad += 1
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                print(f"{rel}:{n}: {target}: no heading '#{frag}' in {os.path.relpath(dest, root)}")
                bad += 1
    print(f"links: {len(files)} pages, {bad} broken link(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
