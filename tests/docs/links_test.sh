#!/usr/bin/env bash
# links_test.sh LINKS_PY README.md DOCS_MD...: every relative link of README.md and docs/*.md
# resolves (links.py). The targets are anywhere in the repository, so the check runs on the
# source tree, found through README.md's runfile (a symlink to the checkout); tagged "external"
# so that Bazel runs it again when any file, not only the pages, changed. First a self-check:
# a page with a broken link and a bad anchor must fail.
set -uo pipefail
py=$1 readme=$2
root=$(dirname "$(readlink -f "$readme")")
[ -f "$root/README.md" ] && [ -d "$root/docs" ] || { echo "FAIL: no checkout at '$root'"; exit 1; }

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/docs"
printf '# A\n\n## Two words\n\n[ok](docs/b.md#b) [ok](#two-words) [bad](docs/none.md)\n' > "$t/README.md"
printf '# B\n\n[up](../README.md#two-words) [bad](../README.md#three) `[code](x.md)`\n' > "$t/docs/b.md"
out=$(python3 "$py" "$t" README.md docs/b.md)
if [ $? = 0 ] || [ "$(grep -c ': no such file\|: no heading' <<<"$out")" != 2 ]; then
  echo "FAIL: links.py missed the broken links of its self-check:"; echo "$out"; exit 1
fi

cd "$root" || exit 1
python3 "$py" "$root" README.md docs/*.md
