#!/usr/bin/env python3
"""advice_table.py: the text work of tests/gpu/advice_check.sh (no figure is computed here: the
advice and the prediction are what gpuanalyze report and gpureplay print, the real figures what
the jobs printed).

  advice_table.py advice REPORT.txt     two lines: the setting the report chose (a gpureplay
                                        --policy SPEC) and the shell text it pastes (empty when
                                        it pastes nothing); exit 1 if the report chose none
  advice_table.py figure RUN.out        the real figure of a job's run: the last GPUMEM_RESULT
                                        line's max_memory_reserved (PyTorch), else its JAX
                                        stats' peak_pool_bytes; "?" if there is none
  advice_table.py row JOB SPEC PASTE REPLAY.json ADVISED.out DEFAULT.out
                                        one markdown row (job, advice, predicted, real advised,
                                        real default, verdict) on stdout
  advice_table.py run JOB VARIANT RC POLICY ENV TRACE RUN.out
                                        one JSON line of the real-run record the corpus tables
                                        read ({"job", "variant", "rep", "rc", "result", ...})
  advice_table.py summary ROWS.md       the closing counts of the rows
Verdicts: exact (real = gpureplay's peak_reserved_bytes), in range (inside gpureplay's stated
range: peak_reserved_range low..high, widened to placement_bump_bytes where it says one), miss
(outside), and ", MORE THAN THE DEFAULT" after any of them when the advised run reserved more than
the default's run; "NO RUN" when a run printed no figure."""
import json
import re
import sys


def advice(text):
    """(spec, paste) from gpuanalyze report's text for one trace, or None."""
    spec = paste = None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"best policy: (\S+) \(", s)
        if m and spec is None:
            spec = m.group(1)
        m = re.match(r"keep the default \(([^)]+)\)", s)
        if m and spec is None:
            spec = m.group(1)
        if s.startswith("paste:") and paste is None:
            paste = s[len("paste:"):].strip()
    if spec is None:
        return None
    if paste is None or paste.startswith("nothing"):
        paste = ""
    return spec, paste


def result(path):
    r = None
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("GPUMEM_RESULT "):
                    try:
                        r = json.loads(line[len("GPUMEM_RESULT "):])
                    except ValueError:
                        pass
    except OSError:
        pass
    return r


def figure(path):
    r = result(path)
    if not r:
        return None
    if isinstance(r.get("max_memory_reserved"), int):
        return r["max_memory_reserved"]
    st = r.get("stats") or {}
    v = st.get("peak_pool_bytes", st.get("pool_bytes"))
    return v if isinstance(v, int) else None


def prediction(path):
    """(peak_reserved_bytes, low, high) of the gpureplay --json run (its first row)."""
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                p = d["peak_reserved_bytes"]
                lo = hi = p
                rg = d.get("peak_reserved_range") or {}
                if "low_bytes" in rg:
                    lo, hi = min(lo, rg["low_bytes"]), max(hi, rg["high_bytes"])
                if "placement_bump_bytes" in d:
                    lo, hi = min(lo, d["placement_bump_bytes"]), max(hi, d["placement_bump_bytes"])
                return p, lo, hi
    raise ValueError("%s: no gpureplay result" % path)


def verdict(pred, lo, hi, adv, dflt):
    if adv is None or dflt is None:
        return "NO RUN"
    v = "exact" if adv == pred else ("in range" if lo <= adv <= hi else "miss")
    if adv > dflt:
        v += ", MORE THAN THE DEFAULT"
    return v


def row(job, spec, paste, replay, adv_out, dflt_out):
    try:
        pred, lo, hi = prediction(replay)
    except (OSError, ValueError, KeyError) as e:
        return "| %s | `%s` | ? | ? | ? | NO PREDICTION (%s) |" % (job, paste or "(default kept)", e)
    adv, dflt = figure(adv_out), figure(dflt_out)
    shown = str(pred) if lo == hi else "%d (%d..%d)" % (pred, lo, hi)
    return "| %s | `%s` | %s | %s | %s | %s |" % (
        job, paste or "(default kept)", shown, "?" if adv is None else adv,
        "?" if dflt is None else dflt, verdict(pred, lo, hi, adv, dflt))


def summary(path):
    rows = [l for l in open(path) if l.startswith("| ") and not l.startswith("| job ")]
    v = [l.rstrip().rstrip("|").rsplit("|", 1)[1].strip() for l in rows]
    n = len(v)
    exact = sum(1 for x in v if x.startswith("exact"))
    inr = sum(1 for x in v if x.startswith("in range"))
    worse = sum(1 for x in v if "MORE THAN THE DEFAULT" in x)
    bad = n - exact - inr
    split = sum(1 for l in rows if "max_split_size_mb" in l)
    return ("%d of %d advised runs exact to the byte, %d inside the stated range, %d missed or did "
            "not run; %d reserve more than the default; %d advice lines hold max_split_size_mb"
            % (exact, n, inr, bad, worse, split)), (bad == 0 and worse == 0)


def main(a):
    if len(a) == 2 and a[0] == "advice":
        r = advice(open(a[1], errors="replace").read())
        if r is None:
            print("advice_table.py: %s: no 'best policy:' or 'keep the default' line" % a[1], file=sys.stderr)
            return 1
        print(r[0])
        print(r[1])
        return 0
    if len(a) == 2 and a[0] == "figure":
        f = figure(a[1])
        print("?" if f is None else f)
        return 0
    if len(a) == 8 and a[0] == "run":
        print(json.dumps({"job": a[1], "variant": a[2], "rep": 1, "rc": int(a[3]), "policy": a[4],
                          "env": a[5], "trace": a[6], "result": result(a[7])}, sort_keys=True))
        return 0
    if len(a) == 7 and a[0] == "row":
        print(row(*a[1:7]))
        return 0
    if len(a) == 2 and a[0] == "summary":
        line, ok = summary(a[1])
        print(line)
        return 0 if ok else 3
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
