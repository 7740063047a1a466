#!/usr/bin/env python3
"""predict_table.py: the prediction table of gpurec predict (PREDICTION.md on stdout).

  predict_table.py --bin DIR --dir W [--check PREDICTION.md] [--work TMP]

DIR holds gpurec and gpureplay (bazel-bin's or .dist/); W is traces/predicted as
tests/gpu/predict_gpu.sh leaves it: the GPT-2-like batch job's recordings rec.bN.torch.zst and
runs.jsonl at the top (tests/gpu/predict_job.py), and one directory per job of
tests/gpu/predict_corpus.py's JOBS with its recordings rec.vN.torch.zst and runs.jsonl (the
batch job's directory holds only its later runs). A job without recordings is listed as not
yet recorded.
For each job, set of recordings and target (2x and 4x the largest recorded value): `gpurec
predict` (a refusal is a row with its reason), then `gpureplay --json` of the predicted trace
under every setting, against the real unrecorded run at that value and setting
(torch.cuda.max_memory_reserved). The recordings themselves are replayed too. Then the largest
value that fits the job's emulated card, per setting: `gpurec predict --fit=CAP --other=0`
against the real largest found by the runs (a value that fits and the next one that does not).
The JAX job (JAX_JOBS, tests/gpu/predict_jax.sh) has JAX's settings: its real figure is memory_stats()'s
peak_pool_bytes, and whether the run ran out of memory, which the replay's must match (a preallocated
fraction's pool is the fraction: "fits" is its answer; "OOM MISMATCH" else).
No GPU needed: the lead can rerun it on the build machine from the unpacked tarball.
Verdicts (issue 19): within 1 % at 2x the largest recorded value, 3 % at 4x ("off" else); a
refusal is acceptable (it names the recording to add; a setting the per-setting check refused shows the
range its uncertain sizes give the peak reserved, to the byte, and where the real run lies against it:
a range is not a bound, and answers nothing); a miss above 5 % that was not refused is "SILENT MISS"; the largest fit
equal to the real one or one step below, never above. A real run held to too small a share of
the GPU (num_alloc_retries > 0 or an OOM where none was meant) is "DISTURBED", not a measurement.
--check FILE: regenerate the table and exit 1 when it differs from FILE, or when a job with
runs misses a target (off, SILENT MISS, ABOVE, TOO LOW, DISTURBED, NO RUN, ERROR): a CI test over
checked-in data."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from predict_corpus import JOBS, SETTINGS  # noqa: E402

# Issue 26's jobs (tests/gpu/predict_hf.py, tests/gpu/predict_hf_gpu.sh): recorded by plain `gpurec` (default
# mode) as users run them, the value twice in the command line (`python3 predict_hf.py hf_batch 8 out/hf_batch/rb8`);
# real runs under the settings of "runs" only, no largest-fit runs.
HF_JOBS = {
    "hf_batch": {"what": "batch", "recorded": [4, 8, 16], "cap": 16, "step": 1, "dir": "hf_batch", "rec": "rec.v{v}.zst",
                 "runs": ("default", "expandable"), "cmd": "tests/gpu/predict_hf.py hf_batch",
                 "about": "HuggingFace GPT2LMHeadModel from a config (4 x 512, 8 heads, vocabulary 16384), AdamW, fp32, "
                          "sequence 256, in the batch; recorded by plain gpurec"},
    "hf_seq": {"what": "sequence length", "recorded": [128, 256, 384], "cap": 12, "step": 32, "max": 2048, "dir": "hf_seq",
               "rec": "rec.v{v}.zst", "runs": ("default", "expandable"), "cmd": "tests/gpu/predict_hf.py hf_seq",
               "about": "the same model at batch 4 in the sequence length (the library's default attention); plain gpurec; "
                     "its largest fit searched up to the model's 2048 positions (--max)"},
    "resnet": {"what": "batch", "recorded": [16, 32, 64], "cap": 16, "step": 1, "dir": "resnet", "rec": "rec.v{v}.zst",
               "runs": ("default", "expandable"), "cmd": "tests/gpu/predict_hf.py resnet",
               "about": "torchvision ResNet-50 training (100 classes, 128 x 128 images, SGD momentum) in the batch; plain gpurec"},
}
# JAX's settings (issue 26 item 3): BFC's pool grown on demand (memory_stats()'s peak_pool_bytes), and a
# preallocated fraction of the GPU (the pool is the fraction; out of memory or not is the answer).
JAX_SETTINGS = [("growth", "XLA_PYTHON_CLIENT_PREALLOCATE=false", "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false")] + \
    [("fraction_%s" % f, "XLA_PYTHON_CLIENT_MEM_FRACTION=%s" % f, "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=%s" % f)
     for f in ("0.02", "0.04", "0.08")]
# tests/gpu/predict_jax.sh's job: recorded cold (as users run it, compiling inside the recording) by plain gpurec;
# real runs under JAX_SETTINGS at the targets (growth also at the recorded values); no largest-fit runs.
JAX_JOBS = {
    "jax_mlp_big": {"what": "batch", "recorded": [2048, 4096, 8192], "dir": "jax_mlp_big", "rec": "rec.v{v}.zst",
                    "settings": JAX_SETTINGS, "runs": tuple(n for n, _, _ in JAX_SETTINGS), "fit": False,
                    "cmd": "tests/gpu/predict_hf.py jax_mlp", "made_by": "tests/gpu/predict_jax.sh",
                    "about": "a JAX MLP (4 x 2048, Adam-like update under jit, 3 steps) in the batch; plain gpurec, "
                             "JAX's settings; real figures memory_stats()'s peak_pool_bytes and out of memory or not"},
}
ALL_JOBS = dict(JOBS, **HF_JOBS, **JAX_JOBS)

JAX_HEAD = ["| recordings | target | confidence | setting | predicted peak pool (B), OOM | real peak_pool_bytes (B), OOM | "
            "error % | verdict |", "|---|---:|---:|---|---:|---:|---:|---|"]
JAX_ABOUT = ("Settings: growth is `XLA_PYTHON_CLIENT_PREALLOCATE=false` (BFC's pool grown on demand: the real figure is\n"
             "`memory_stats()['peak_pool_bytes']`); fraction_F is `XLA_PYTHON_CLIENT_MEM_FRACTION=F` (the pool preallocated,\n"
             "F of the GPU: the answer is whether the job runs out of memory in it, and a wrong one fails the table).\n"
             "The recordings are cold, made as users run the job: XLA compiles inside them, and its autotuner's\n"
             "scratch is in them and in the real runs. Recordings made after a run that filled JAX's compilation cache\n"
             "(warm: the job's own allocations only) predict a warm run, and are not held against these cold runs\n"
             "(docs/predict.md).\n")


def settings_of(job):
    return ALL_JOBS[job].get("settings", SETTINGS)

FAIL_WORDS = ("SILENT MISS", "off (", "ABOVE", "TOO LOW", "DISTURBED", "NO RUN", "ERROR", "OOM MISMATCH")
LEGACY_CASES = [((4, 8), 16), ((4, 8), 32), ((8, 16), 32), ((8, 16), 64), ((4, 8, 16), 32), ((4, 8, 16), 64)]


def replay(bin_dir, trace, settings=SETTINGS, ooms=None):
    """Peak reserved per setting (device 0's line first); ooms, a dict, gets whether each ran out of memory."""
    cmd = [os.path.join(bin_dir, "gpureplay"), "--json"] + ["--policy=" + p for _, _, p in settings] + [trace]
    p = subprocess.run(cmd, capture_output=True, text=True)
    peaks = {}
    for line in p.stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        peaks.setdefault(r["policy"].rstrip(":"), r["peak_reserved_bytes"])
        if ooms is not None:
            ooms.setdefault(r["policy"].rstrip(":"), r.get("ooms", 0) > 0)
    return peaks


def job_dir(d, job):
    return d if ALL_JOBS[job]["dir"] == "." else os.path.join(d, ALL_JOBS[job]["dir"])


def recordings(d, job):
    j = ALL_JOBS[job]
    return [(os.path.join(job_dir(d, job), j["rec"].format(v=v)), v) for v in j["recorded"]
            if os.path.exists(os.path.join(job_dir(d, job), j["rec"].format(v=v)))]


def load_runs(d, job):
    """Runs of the job (the batch job's first runs.jsonl has no purpose: rec.* and real.*), and
    whether the corpus script has run it (its own runs.jsonl exists)."""
    files = [os.path.join(d, job, "runs.jsonl")]
    if ALL_JOBS[job]["dir"] == ".":
        files.insert(0, os.path.join(d, "runs.jsonl"))
    runs = []
    for f in files:
        if not os.path.exists(f):
            continue
        for line in open(f):
            r = json.loads(line)
            r.setdefault("value", r.get("batch"))
            r.setdefault("purpose", "rec" if r["run"].startswith("rec.") else "scale")
            r.setdefault("cap_bytes", 0)
            runs.append(r)
    return runs, os.path.exists(files[-1])


def real_peak(runs, value, conf):
    """(max_memory_reserved, note): the unrecorded run at value under conf (the recording's own run
    under the default setting at a recorded value)."""
    got = None
    for purpose in ("scale", "rec"):
        for r in runs:
            if r["purpose"] == purpose and r["value"] == value and r["conf"] == conf and r.get("result"):
                got = got or r["result"]
        if got:
            break
    if not got:
        return None, None
    if got.get("oom") or got.get("num_alloc_retries", 0):
        return got["max_memory_reserved"], "DISTURBED"
    return got["max_memory_reserved"], None


def real_jax(runs, value, conf):
    """(peak_pool_bytes, ran out of memory) of the JAX job's unrecorded run at value under conf; (None, None) if none.
    Under a preallocated fraction running out of memory is the answer, not a disturbance."""
    for r in runs:
        if r["purpose"] == "scale" and r["value"] == value and r["conf"] == conf:
            res = r.get("result") or {}
            oom = bool(r.get("oom") or r["rc"] or res.get("oom"))
            if res or oom:  # a run out of memory may print no result: its pool is not known
                return res.get("peak_pool_bytes"), oom
    return None, None


def fits(oom):
    return "OOM" if oom else "fits"


def real_largest(runs, conf, step):
    """The largest value that fit the cap while value + step did not; None when the runs do not say."""
    fit, nofit = set(), set()
    for r in runs:
        if r["purpose"] == "fit" and r["conf"] == conf and r.get("result") and r["rc"] == 0:
            (nofit if r["result"].get("oom") else fit).add(r["value"])
    for v in sorted(fit, reverse=True):
        if v + step in nofit:
            return v
    if fit == set() and step in nofit:
        return 0
    return None


def verdict(p, r, factor, note):
    if note:
        return note
    if not (r and p):
        return "-"
    e = abs(100.0 * (p - r) / r)
    bound = 1.0 if factor <= 2 else 3.0
    if e <= bound:
        return "ok (within %g %%)" % bound
    if e <= 5.0:
        return "off (over %g %%)" % bound
    return "SILENT MISS"


def to_add(stderr):
    """The recording gpurec's refusal says to add, without the paths (they depend on where the corpus is)."""
    m = re.search(r"record once more at ([0-9.e+]+)", stderr)
    if m:
        left = " (leaving out the recording where the job allocated differently)" if "leaving out" in stderr else ""
        return "add a recording at %s%s" % (m.group(1), left)
    m = re.search(r"record the job at (\S+) itself", stderr)
    if m:
        return "record the job at %s itself" % m.group(1)
    m = re.search(r"record once more at a value nearer (\S+)", stderr)
    return "add a recording nearer %s" % m.group(1) if m else "?"


def predict_rows(a, work, job, runs, ran, out, cases, header_rows):
    recs = dict((v, f) for f, v in recordings(a.dir, job))
    settings = settings_of(job)
    jax = job in JAX_JOBS

    def real(value, conf):
        """(the real figure, a note that disqualifies it, the real run's OOM for a JAX job)"""
        if jax:
            pool, oom = real_jax(runs, value, conf)
            return pool, None, oom
        r, note = real_peak(runs, value, conf)
        return r, note, None

    def shown(peak, oom):
        """a figure, and for a JAX job whether the run (or the replay) ran out of memory"""
        return "%s, %s" % (peak or "-", fits(oom)) if jax and oom is not None else peak
    for v in sorted(recs):  # the replay alone, at recorded values
        ooms = {}
        peaks = replay(a.bin, recs[v], settings, ooms)
        for name, conf, pol in settings:
            r, note, room = real(v, conf)
            p = peaks.get(pol.rstrip(":"))
            err = "%+.2f" % (100.0 * (p - r) / r) if r and p else "-"
            if r and p and p != r and not note and not jax:  # what the self-check finds (docs/trust.md)
                note = "the replay misses the run: gpurec predict and gpuanalyze report warn"
            out("| %d (replayed, not predicted) | %d | - | %s | %s | %s | %s | %s |" % (
                v, v, name, shown(p, ooms.get(pol.rstrip(":"))) or "-", shown(r, room) or "-", err, note or "-"))
    for inputs, target in cases:
        label = ", ".join(str(b) for b in inputs)
        if not all(v in recs for v in inputs):
            out("| %s | %d | - | - | missing recording | - | - | - |" % (label, target))
            continue
        pred = os.path.join(work, "pred.%s.%s.at%d.zst" % (job, "_".join(map(str, inputs)), target))
        cmd = [os.path.join(a.bin, "gpurec"), "predict"] + ["%s@%d" % (recs[v], v) for v in inputs] + \
              ["--at=%d" % target, "-o", pred] + ["--policy=" + p for _, _, p in settings]
        p = subprocess.run(cmd, capture_output=True, text=True)
        sys.stderr.write("$ %s\n%s\n" % (" ".join(cmd), p.stderr))
        # a prediction whose uncertain sizes were checked per setting (pred_settings.c): a
        # setting they move beyond the tolerance is refused, the others answered; each with the
        # range the uncertain sizes' ends give its peak reserved, to the byte
        checked = {}
        for mm in re.finditer(r"^gpurec:   (answered|REFUSED) +(\S+): peak reserved \S+ \S+ \((.+?) with the uncertain "
                              r"sizes at their ends, ([0-9.]+ %); ([0-9]+) in ([0-9]+)\.\.([0-9]+) bytes\)$", p.stderr, re.M):
            checked[mm.group(2)] = (mm.group(1), "%s, moved %s" % (mm.group(3), mm.group(4)),
                                    int(mm.group(5)), int(mm.group(6)), int(mm.group(7)), float(mm.group(4)[:-2]))
        if p.returncode == 3 and not checked:
            lines = p.stderr.strip().splitlines()  # the refusal's line: warnings may come before it
            first = next((l for l in lines if l.startswith("gpurec: cannot predict")), lines[0])
            reason = first.split(": ", 1)[-1].replace("|", "/")
            out("| %s | %d | refused | all | refused: %s; %s | - | - | refused |" % (label, target, reason, to_add(p.stderr)))
            continue
        if p.returncode not in (0, 3):
            out("| %s | %d | - | - | error: %s | - | - | ERROR |" % (label, target, p.stderr.strip().replace("|", "/")))
            continue
        m = re.search(r"confidence ([0-9.]+)%", p.stderr)
        conf_pct = m.group(1) + " %" if m else "?"
        if checked:
            conf_pct = "checked"
        ooms = {}
        peaks = replay(a.bin, pred, settings, ooms) if p.returncode == 0 else {}
        for name, conf, pol in settings:
            if checked.get(pol, ("answered",))[0] == "REFUSED":
                # refused as a figure; the range is said, and held against the real run
                _, moved, fitted, lo, hi, move = checked[pol]
                r, note, room = real(target, conf)
                if r and not note:
                    # a range is not a bound: it leaves out the fit's and the replay's own error
                    # (said in the figures); a refusal, whichever side of it the real run lies
                    v = ("refused (real in range)" if lo <= r <= hi else
                         "refused (real %.2f %% %s its range)" % (100.0 * abs(r - (lo if r < lo else hi)) / (lo if r < lo else hi),
                                                                   "below" if r < lo else "above"))
                else:
                    v = "refused"
                # refused within the tolerance: an end of the range runs out of memory (pred_settings.c)
                why = ("the uncertain sizes move its peak reserved beyond 1 %" if move > 1.0 else
                       "an end of the uncertain sizes' range runs out of memory")
                out("| %s | %d | refused | %s | refused: %s (%s; %d..%d B, width %.2f %%); %s | %s | - | %s |" % (
                    label, target, name, why, moved, lo, hi, 100.0 * (hi - lo) / fitted, to_add(p.stderr),
                    shown(r, room) or "-", v))
                continue
            r, note, room = real(target, conf)
            pk = peaks.get(pol.rstrip(":"))
            poom = ooms.get(pol.rstrip(":"))
            e = "%+.2f" % (100.0 * (pk - r) / r) if r and pk else "-"
            v = verdict(pk, r, target / max(inputs), note)
            if jax and room is not None and poom is not None and room != poom:
                # under a preallocated fraction the question is whether it fits: a wrong answer fails
                v = "OOM MISMATCH (predicted %s, real %s)" % (fits(poom), fits(room))
            elif jax and room and r is None:
                v = "ok (out of memory, as predicted)"
            if r is None and room is None and ran:
                v = "NO RUN" if name in ALL_JOBS[job].get("runs", (name,)) else "-"
            out("| %s | %d | %s | %s | %s | %s | %s | %s |" % (label, target, conf_pct, name, shown(pk, poom) or "-",
                                                               shown(r, room) or "no run", e, v))


def fit_rows(a, job, runs, ran, out):
    j = ALL_JOBS[job]
    if not j.get("fit", True):
        return
    recs = recordings(a.dir, job)
    if len(recs) < 2:
        out("| %s | %d GiB | all | - | - | not yet recorded |" % (job, j["cap"]))
        return
    cmd = [os.path.join(a.bin, "gpurec"), "predict", "-q"] + ["%s@%d" % r for r in recs] + \
          ["--fit=%dGiB" % j["cap"], "--other=0", "--step=%d" % j["step"], "--format=json"] + \
          (["--max=%d" % j["max"]] if "max" in j else []) + \
          ["--policy=" + p for _, _, p in SETTINGS]
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write("$ %s\n%s\n" % (" ".join(cmd), p.stderr))
    try:
        answers = dict((s["policy"], s) for s in json.loads(p.stdout)["settings"])
    except ValueError:
        answers = {}
    for name, conf, pol in SETTINGS:
        s = answers.get(pol)
        if not s:
            pred, refused = "error: %s" % p.stderr.strip().replace("|", "/"), False
        elif s["state"] == "refused":
            pred, refused = "refused at %g: %s" % (s["refused_at"], s["reason"].replace("|", "/")), True
        elif s["state"] == "fits":
            pred, refused = int(s["largest"]), False
        elif s["state"] == "at_least":  # everything up to --max fits: the job's own limit, not a memory one
            pred, refused = "at least %d (--max)" % int(s["largest"]), False
        else:
            pred, refused = s["state"], False
        real = real_largest(runs, conf, j["step"])
        if s and s["state"] == "at_least":  # checked by a run at --max itself: it fits, or not
            at = [r for r in runs if r["purpose"] == "fit" and r["conf"] == conf and r["value"] == int(s["largest"])
                  and r.get("result") and r["rc"] == 0]
            if at:
                real = "fits at %d" % int(s["largest"]) if not at[-1]["result"].get("oom") else \
                       "out of memory at %d" % int(s["largest"])
                v = "ok (fits, as predicted)" if real.startswith("fits") else "ABOVE"
                out("| %s | %d GiB | %s | %s | %s | %s |" % (job, j["cap"], name, pred, real, v))
                continue
        if refused:
            v = "refused"
        elif real is None:
            v = "NO RUN" if ran and "runs" not in j else "-"
        elif not isinstance(pred, int):
            v = "ERROR"
        elif pred == real:
            v = "ok (equal)"
        elif pred == real - j["step"]:
            v = "ok (one below)"
        elif pred > real:
            v = "ABOVE"
        else:
            v = "TOO LOW (%d below)" % ((real - pred) // j["step"])
        out("| %s | %d GiB | %s | %s | %s | %s |" % (job, j["cap"], name, pred,
                                                   real if real is not None else "not yet run" if not ran or "runs" in j
                                                   else "no answer", v))


def figures(lines, out):
    """Issue 26's figures over the predictions (not the replays of recordings, not the largest fits): the
    share of (job, recordings, target, setting) cases answered, answered cases with a real run off by
    more than 1 %, refusals by reason."""
    answered = refused = checked = off = ranged = inside = named = 0
    reasons = {}
    nset = len(SETTINGS)  # the job's settings: the batch job's first, then each section's
    for line in lines:
        m = re.match(r"## (\S+): ", line)
        if m and m.group(1) in ALL_JOBS:
            nset = len(settings_of(m.group(1)))
        c = [x.strip() for x in line.split("|")[1:-1]]
        if len(c) != 8 or not c[1].isdigit() or "replayed" in c[0] or c[4] == "missing recording":
            continue
        if c[7].startswith("refused"):
            if c[5] not in ("-", "no run"):
                ranged += 1
                inside += c[7] == "refused (real in range)"
            n = nset if c[3] == "all" else 1  # a refusal for all settings stands for each of them
            refused += n
            named += n if re.search(r"; (add a recording|record the job)", c[4]) else 0
            why = re.sub(r"[0-9.]+", "N", c[4].split(":", 2)[-1].split(";")[0].split("(")[0]).strip()[:140]
            reasons[why] = reasons.get(why, 0) + n
            continue
        answered += 1
        if c[5] not in ("-", "no run") and c[6] != "-":
            checked += 1
            off += abs(float(c[6])) > 1.0
    total = answered + refused
    out("\n## Figures\n")
    out("(job, recordings, target, setting) cases: %d; answered %d (%.0f %%), refused %d; answered with a real run %d, "
        "off by more than 1 %%: %d." % (total, answered, 100.0 * answered / max(total, 1), refused, checked, off))
    out("Refused cases that name the recording to add: %d of %d." % (named, refused))
    out("Refused cases whose uncertain sizes were checked per setting, with the range their two ends give the peak "
        "reserved, and a real run: %d; the real run inside that range: %d. A range is not a bound (it leaves out the fit's "
        "and the replay's own error), so it answers nothing: those cases stay refused." % (ranged, inside))
    out("")
    out("| refusal | cases |")
    out("|---|---:|")
    for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
        out("| %s | %d |" % (why.replace("|", "/"), n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--check")
    ap.add_argument("--work", help="where the predicted traces go (default: --dir; with --check: a temporary directory)")
    a = ap.parse_args()
    work = a.work or (tempfile.mkdtemp(prefix="predict_table.") if a.check else a.dir)
    os.makedirs(work, exist_ok=True)
    lines = []
    out = lines.append
    runs, ran = load_runs(a.dir, "gpt_batch")
    env = {}
    for r in runs:
        if r["purpose"] == "scale" and r.get("result"):
            env = r["result"]
            break
    out("# gpurec predict: predicted peak reserved against real runs\n")
    out("Job: tests/gpu/predict_job.py (GPT-2-like: 6 x 768, sequence 512, vocabulary 16384, AdamW, fp32, 3 steps).")
    out("Recorded with `gpurec --mode=torch` under the default setting at batch 4, 8, 16; the real runs are unrecorded")
    out("(torch.cuda.max_memory_reserved). GPU: %s, torch %s. Made by `bash tests/gpu/predict_gpu.sh` (GPU) and" %
        (env.get("device", "?"), env.get("torch", "?")))
    out("`python3 tests/gpu/predict_table.py --bin DIR --dir W` (no GPU).")
    hr, _ = load_runs(a.dir, "hf_batch")
    he = next((r["result"] for r in hr if r.get("result")), {})
    out("The jobs of issue 26 (hf_batch, hf_seq, resnet) are recorded by plain `gpurec` (its default mode) as users run "
        "them, the value")
    out("twice in the command line (`python3 predict_hf.py hf_batch 8 out/hf_batch/rb8`), on %s, torch %s, by" %
        (he.get("device", "?"), he.get("torch", "?")))
    out("`bash tests/gpu/predict_hf_gpu.sh` (2026-11-28; its log in hf_logs/); their real runs are under the default and")
    out("expandable segments only (max_split_128: \"no run\"), and they have no largest-fit runs. The JAX job (jax_mlp_big)")
    out("is recorded the same way by `bash tests/gpu/predict_jax.sh` (2026-11-29, its summary in jax_mlp_big/) and has")
    out("its own settings and real figures (its section). The figures at the end.\n")
    head = ["| recordings | target | confidence | setting | predicted peak reserved (B) | real max_memory_reserved (B) | error % | verdict |",
            "|---|---:|---:|---|---:|---:|---:|---|"]
    for h in head:
        out(h)
    predict_rows(a, work, "gpt_batch", runs, ran, out, LEGACY_CASES, head)
    for job in ALL_JOBS:
        if job == "gpt_batch":
            continue
        j = ALL_JOBS[job]
        out("\n## %s: %s\n" % (job, j["about"]))
        recs = recordings(a.dir, job)
        if len(recs) < 2:
            out("Not yet recorded (recordings at %s %s: run %s on a GPU)." %
                (j["what"], ", ".join(map(str, j["recorded"])), j.get("made_by", "tests/gpu/predict_gpu.sh")))
            continue
        jr, jran = load_runs(a.dir, job)
        out("Recorded at %s %s (`%s`); targets 2x and 4x the largest." %
            (j["what"], ", ".join(str(v) for _, v in recs), j.get("cmd", "tests/gpu/predict_jobs.py " + job)))
        if job in JAX_JOBS:
            out(JAX_ABOUT)
        for h in (JAX_HEAD if job in JAX_JOBS else head):
            out(h)
        vs = [v for _, v in recs]
        top = max(vs)
        cases = [(tuple(vs[-2:]), 2 * top), (tuple(vs[-2:]), 4 * top)]
        if len(vs) >= 3:
            cases += [(tuple(vs), 2 * top), (tuple(vs), 4 * top)]
        predict_rows(a, work, job, jr, jran, out, cases, head)
    out("\n## The largest value that fits\n")
    out("Each job on an emulated card (`torch.cuda.set_per_process_memory_fraction`: the allocator may hold at most the")
    out("cap), predicted by `gpurec predict RECORDINGS --fit=CAP --other=0 --step=STEP` (default margin) from all of the")
    out("job's recordings, against the real largest: a run at that value fits and one at the next step does not")
    out("(tests/gpu/predict_corpus.py searches it on the GPU from the prediction). Never above; equal or one below.\n")
    out("| job | cap | setting | predicted largest | real largest | verdict |")
    out("|---|---:|---|---:|---:|---|")
    for job in ALL_JOBS:
        jr, jran = load_runs(a.dir, job)
        fit_rows(a, job, jr, jran, out)
    figures(lines, out)
    text = "\n".join(lines) + "\n"
    if a.check:
        want = open(a.check).read()
        if want != text:
            sys.stderr.write("predict_table: the table differs from %s:\n%s" % (a.check, text))
            return 1
        missed = [line for line in lines if any(w in line for w in FAIL_WORDS)]
        if missed:
            sys.stderr.write("predict_table: targets missed:\n%s\n" % "\n".join(missed))
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
