#!/usr/bin/env python3
"""predict_corpus.py: the corpus of gpurec predict (issue 19), in one call on the GPU machine.

  predict_corpus.py --bin DIR --work W [--budget SECONDS] [--python PY]

For every job of JOBS (tests/gpu/predict_jobs.py; gpt_batch is tests/gpu/predict_job.py, whose
recordings are checked in already and are not made again):
  1. record it with `gpurec --mode=torch` at each value of `recorded` (default setting);
  2. predict (CPU, DIR's gpurec and gpureplay) at 2x and 4x the largest recorded value, and the
     largest value that fits within `cap` GiB per setting (`gpurec predict --fit=CAP --other=0`);
  3. run it unrecorded at 2x and 4x under every setting of SETTINGS, and find its real largest
     value that fits under the same cap: torch.cuda.set_per_process_memory_fraction emulates a
     card of `cap` GiB; the search starts at the predicted largest and gallops, then bisects,
     on multiples of `step` (a real bisection, seeded by the prediction so that it takes 2-4 runs).
Runs go side by side while their memory fits: each claims its cap, or for an uncapped run the
predicted peak + 25 % (+ 1 GiB for its CUDA context), and is held to that claim by the same
fraction; a run whose claim was too small shows num_alloc_retries > 0 or an OOM, and
predict_table.py marks it (the row is then not a measurement).
Writes W/<job>/rec.vN.torch.zst and W/<job>/runs.jsonl, one line per run:
  {"run", "job", "value", "conf", "purpose": "rec"|"scale"|"fit", "cap_bytes", "rc", "ms", "result"}
No new runs start after --budget seconds (default 480), so one call stays within 10 minutes."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30

# The allocator settings every job is run under (predictions are replayed under the same).
SETTINGS = [("default", "", "pytorch:"), ("expandable", "expandable_segments:True", "pytorch:expandable_segments:True"),
            ("max_split_128", "max_split_size_mb:128", "pytorch:max_split_size_mb:128")]

# name: what the value is; recorded values; the fit's emulated card (GiB) and search step;
# script (relative to tests/gpu) and its arguments before the value flag; rec: the recordings'
# file name pattern in the job's directory ("{v}": the value).
JOBS = {
    "gpt_batch": {"what": "batch", "recorded": [4, 8, 16], "cap": 16, "step": 1, "dir": ".",
                  "rec": "rec.b{v}.torch.zst", "argv": ["predict_job.py", "--batch"], "record": False,
                  "about": "GPT-2-like training (6 x 768, sequence 512, vocabulary 16384, AdamW, fp32, 3 steps) in the batch"},
    "gpt_seq": {"what": "sequence length", "recorded": [128, 256, 384], "cap": 12, "step": 32, "dir": "gpt_seq",
                "rec": "rec.v{v}.torch.zst", "argv": ["predict_jobs.py", "gpt_seq", "--value"], "record": True,
                "about": "the same model at batch 4 in the sequence length; attention softmax(q k^T) written out "
                         "(quadratic in the length)"},
    "conv_batch": {"what": "batch", "recorded": [16, 32, 64], "cap": 8, "step": 1, "dir": "conv_batch",
                   "rec": "rec.v{v}.torch.zst", "argv": ["predict_jobs.py", "conv_batch", "--value"], "record": True,
                   "about": "ResNet-18 training (torchvision, 100 classes, SGD momentum, 128 x 128 images) in the batch"},
    "conv_image": {"what": "image size", "recorded": [64, 96, 128], "cap": 8, "step": 32, "dir": "conv_image",
                   "rec": "rec.v{v}.torch.zst", "argv": ["predict_jobs.py", "conv_image", "--value"], "record": True,
                   "about": "the same at batch 16 in the image side (N x N)"},
    "infer_batch": {"what": "batch", "recorded": [8, 16, 32], "cap": 4, "step": 1, "dir": "infer_batch",
                    "rec": "rec.v{v}.torch.zst", "argv": ["predict_jobs.py", "infer_batch", "--value"], "record": True,
                    "about": "generate-like inference without grad (6 x 768 decoder, prompts of 96/200/40/160/128 "
                             "tokens, 16 decoding steps each, KV cache grown by torch.cat) in the batch"},
}


def targets(job):
    """The values of the unrecorded runs: 2x and 4x the largest recorded (the batch job's table
    also predicts its largest recorded value from the two below it)."""
    top = max(JOBS[job]["recorded"])
    return ([top] if job == "gpt_batch" else []) + [2 * top, 4 * top]


class Memory:
    """GPU memory claims of the runs side by side, served in order (a large claim is not starved)."""

    def __init__(self, total):
        self.free = total
        self.cv = threading.Condition()
        self.queue = []

    def take(self, n, deadline):
        with self.cv:
            me = object()
            self.queue.append(me)
            while self.queue[0] is not me or self.free < n:
                if time.time() > deadline:
                    self.queue.remove(me)
                    self.cv.notify_all()
                    return False
                self.cv.wait(1.0)
            self.queue.pop(0)
            self.free -= n
            self.cv.notify_all()
            return True

    def give(self, n):
        with self.cv:
            self.free += n
            self.cv.notify_all()


class Corpus:
    def __init__(self, a):
        self.a = a
        self.deadline = time.time() + a.budget
        self.lock = threading.Lock()
        self.mem = None
        self.count = 0

    def log(self, msg):
        with self.lock:
            print("  %s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)

    def run(self, job, value, conf, purpose, cap_bytes, record=None):
        """One run of the job; its line appended to W/<job>/runs.jsonl. Returns the result or None."""
        j = JOBS[job]
        d = os.path.join(self.a.work, j["dir"] if j["dir"] != "." else job)
        os.makedirs(os.path.join(d, "out"), exist_ok=True)
        claim = cap_bytes + GIB
        if not self.mem.take(claim, self.deadline):
            self.log("out of time: %s %s %s not run" % (job, value, purpose))
            return None
        with self.lock:
            self.count += 1
            name = "%s.v%d.%s.%d" % (purpose, value, conf.split(":")[0] or "default", self.count)
        cmd = [self.a.python, os.path.join(HERE, j["argv"][0])] + j["argv"][1:] + [str(value)]
        if cap_bytes and purpose != "rec":
            cmd += ["--cap-bytes", str(cap_bytes)]
        if record:
            cmd = [os.path.join(self.a.bin, "gpurec"), "--mode=torch", "-o", record, "--"] + cmd
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
        t0 = time.time()
        try:
            with open(os.path.join(d, "out", name + ".out"), "w") as o, open(os.path.join(d, "out", name + ".err"), "w") as e:
                rc = subprocess.run(cmd, stdout=o, stderr=e, env=env, cwd=d, timeout=240).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        finally:
            self.mem.give(claim)
        ms = int(1000 * (time.time() - t0))
        res = None
        for line in open(os.path.join(d, "out", name + ".out")):
            if line.startswith("GPUMEM_RESULT "):
                res = json.loads(line[len("GPUMEM_RESULT "):])
        rec = {"run": name, "job": job, "value": value, "conf": conf, "purpose": purpose, "cap_bytes": cap_bytes,
               "rc": rc, "ms": ms, "result": res}
        with self.lock:
            with open(os.path.join(d, "runs.jsonl"), "a") as f:
                f.write(json.dumps(rec) + "\n")
        self.log("%s %s=%d %s cap=%.1fGiB rc=%d %dms %s" % (job, purpose, value, conf or "default", cap_bytes / GIB, rc, ms,
                 "OOM" if res and res.get("oom") else res and res.get("max_memory_reserved")))
        return res if rc == 0 else None

    def recordings(self, job):
        j = JOBS[job]
        d = os.path.join(self.a.work, j["dir"] if j["dir"] != "." else job)
        return [(os.path.join(d, j["rec"].format(v=v)), v) for v in j["recorded"]]

    def predict_peak(self, job, value, policy):
        """Predicted peak reserved at value under policy, or None (refused, error)."""
        recs = self.recordings(job)
        out = os.path.join(self.a.work, "pred.%s.%d.zst" % (job, value))
        p = subprocess.run([os.path.join(self.a.bin, "gpurec"), "predict", "-q"] + ["%s@%d" % r for r in recs] +
                           ["--at=%d" % value, "-o", out], capture_output=True, text=True)
        if p.returncode != 0:
            return None
        q = subprocess.run([os.path.join(self.a.bin, "gpureplay"), "--json", "--policy=" + policy, out],
                           capture_output=True, text=True)
        for line in q.stdout.splitlines():
            try:
                return json.loads(line)["peak_reserved_bytes"]
            except (ValueError, KeyError):
                continue
        return None

    def predict_fit(self, job):
        """{policy: predicted largest value} under the job's cap (absent: refused or none)."""
        j = JOBS[job]
        cmd = [os.path.join(self.a.bin, "gpurec"), "predict", "-q"] + ["%s@%d" % r for r in self.recordings(job)] + \
              ["--fit=%dGiB" % j["cap"], "--other=0", "--step=%d" % j["step"], "--format=json"] + \
              ["--policy=" + p for _, _, p in SETTINGS]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            o = json.loads(p.stdout)
        except ValueError:
            self.log("%s: --fit gave no answer: %s" % (job, p.stderr.strip()))
            return {}
        return {s["policy"]: int(s["largest"]) for s in o["settings"] if s["state"] == "fits"}

    def scale(self, job, value, conf, policy):
        """An unrecorded run at value, claiming the predicted peak + 25 % (or a guess)."""
        peak = self.predict_peak(job, value, policy)
        cap = int(1.25 * peak) if peak else 24 * GIB
        self.run(job, value, conf, "scale", cap)

    def fit(self, job, conf, seed):
        """The real largest value that fits the job's cap: from the seed, gallop and bisect."""
        j = JOBS[job]
        step, cap = j["step"], j["cap"] * GIB
        known = {}

        def fits(k):
            if k not in known:
                r = self.run(job, k * step, conf, "fit", cap)
                known[k] = None if r is None else not r.get("oom")
            return known[k]

        k = max(1, seed // step)
        f = fits(k)
        if f is None:
            return
        lo, hi = (k, None) if f else (None, k)
        d = 1
        while lo is None or hi is None:
            if hi is None:
                f = fits(lo + d)
                if f is None:
                    return
                lo, hi = (lo + d, None) if f else (lo, lo + d)
            else:
                if hi - d < 1:
                    lo = 0
                    break
                f = fits(hi - d)
                if f is None:
                    return
                lo, hi = (hi - d, hi) if f else (None, hi - d)
            d *= 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            f = fits(mid)
            if f is None:
                return
            lo, hi = (mid, hi) if f else (lo, mid)
        self.log("%s %s: real largest %d" % (job, conf or "default", lo * step))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=float, default=480)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--device-memory", type=int, default=0, help="bytes (default: torch's figure for GPU 0)")
    ap.add_argument("--checked-in", default=os.path.join(HERE, "..", "..", "traces", "predicted"),
                    help="where gpt_batch's recordings are")
    a = ap.parse_args()
    c = Corpus(a)
    total = a.device_memory
    if not total:
        import torch  # only for the device's memory
        total = torch.cuda.get_device_properties(0).total_memory
    c.mem = Memory(int(0.92 * total))
    jobs = a.jobs.split(",")
    for job in jobs:
        j = JOBS[job]
        if not j["record"]:
            d = os.path.join(a.work, job)
            os.makedirs(d, exist_ok=True)
            for v in j["recorded"]:
                shutil.copy(os.path.join(a.checked_in, j["rec"].format(v=v)), d)
    print("== recordings (gpurec --mode=torch, default setting)", flush=True)
    th = []
    for job in jobs:
        for path, v in c.recordings(job):
            if JOBS[job]["record"]:
                t = threading.Thread(target=c.run, args=(job, v, "", "rec", 4 * GIB, path.replace(".torch.zst", ".zst")))
                t.start()
                th.append(t)
    for t in th:
        t.join()
    print("== predictions (CPU) and real runs: 2x, 4x and the largest that fits, side by side", flush=True)
    th = []
    for job in jobs:
        fit = c.predict_fit(job)
        c.log("%s: predicted largest under %d GiB: %s" % (job, JOBS[job]["cap"], fit))
        for name, conf, policy in SETTINGS:
            seed = fit.get(policy) or 4 * max(JOBS[job]["recorded"])
            th.append(threading.Thread(target=c.fit, args=(job, conf, seed)))
            for v in targets(job):
                if job == "gpt_batch" and name != "max_split_128":
                    continue  # in traces/predicted/runs.jsonl already
                th.append(threading.Thread(target=c.scale, args=(job, v, conf, policy)))
    for t in th:
        t.start()
    for t in th:
        t.join()
    print("== done", flush=True)


if __name__ == "__main__":
    main()
