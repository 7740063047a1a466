#!/bin/bash
# No two C files of one folder call each other's functions both ways, but the pairs listed in
# mutual_calls_allowed.txt (issue 27 item 3). Reads the source tree the runfiles link to.
set -eu
here=$(dirname "$(readlink -f "$0")")
python3 "$here/mutual_calls.py" --allow "$here/mutual_calls_allowed.txt" "$here/../.."
