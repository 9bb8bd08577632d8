#!/usr/bin/env python3
"""mutate-loaders.py - a mutation check of every loader, run by hand (not in CI).

Mutates the seeds of each kind of input file (model, cluster, plan and profile YAML, a
Hugging Face config.json, report's predicted and measured JSON, a measured trace) and runs
the mpplan command that reads each mutant, counting:

  crash      exit status >= 128, or a sanitizer report on stderr
  critical   a GLib / json-glib critical or warning on stderr (G_DEBUG=fatal-criticals
             makes one abort, so it is a crash too)
  exit 0     the mutant was accepted although its mutation makes it malformed (the
             classes marked "malformed" below; a deleted optional key or a changed key the
             reader does not read may be accepted, and is only counted apart)
  unlocated  refused, but no message names the file

Usage: scripts/mutate-loaders.py [--mpplan build-asan/mpplan] [--per-seed N] [--seed S]
       [--keep DIR]   (keep the mutants that were counted, for tests/bad/)
Run it against the ASan+UBSan build (see scripts/test.sh) to catch memory errors too.
"""
import argparse
import copy
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(TOP, "tests", "data")

# The keys each JSON reader checks (a mutation elsewhere may rightly be accepted). The
# report readers check every member mpplan writes (ALL); config.json's reader the keys
# model-hf.c names, not below rope_scaling (only its presence is read).
ALL = None
# A GLib / json-glib critical or warning: common/log.c writes "DOMAIN critical: ...",
# GLib's own writer "DOMAIN-CRITICAL **" (not a message naming a key 'critical_rank').
CRITICAL = re.compile(r"^(\[rank \d+\] )?[\w-]+ (critical|warning): |CRITICAL \*\*|WARNING \*\*",
                      re.M)
HF_OPAQUE = {"rope_scaling"}


def hf_keys():
    """Every key model-hf.c names (its readers look nothing else up)."""
    src = open(os.path.join(TOP, "model", "model-hf.c")).read()
    return set(re.findall(r'"([a-z_0-9]+)"', src))


def run(cmd, env):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


# ---- JSON mutations ------------------------------------------------------------------

def json_paths(doc, keys, path=(), opaque=()):
    """Paths (tuples of keys / indexes) to every value under a key the reader reads (KEYS
    None: every key), not into the values of OPAQUE keys; of a long list, 8 elements
    spread over it."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if keys is None or k in keys:
                out.append(path + (k,))
                if k not in opaque:
                    out += json_paths(v, keys, path + (k,), opaque)
    elif isinstance(doc, list):
        for i in sorted({j * len(doc) // 8 for j in range(8)} & set(range(len(doc)))):
            out.append(path + (i,))
            out += json_paths(doc[i], keys, path + (i,), opaque)
    return out


def get_at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def set_at(doc, path, value):
    get_at(doc, path[:-1])[path[-1]] = value


def other_type(v, rng):
    """A value of another JSON type than V (never null: null reads as absent)."""
    choices = []
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        choices.append(7)
    if not isinstance(v, str):
        choices.append("seven")
    if not isinstance(v, list):
        choices.append([1, 2])
    if not isinstance(v, dict):
        choices.append({"x": 1})
    if not isinstance(v, bool):
        choices.append(True)
    return rng.choice(choices)


def json_mutants(text, keys, rng, n, opaque=()):
    """(class, malformed?, text) mutants of a JSON document."""
    doc = json.loads(text)
    paths = json_paths(doc, keys, (), opaque)
    numbers = [p for p in paths if isinstance(get_at(doc, p), (int, float))
               and not isinstance(get_at(doc, p), bool)]
    out = []
    for _ in range(n):
        kind = rng.choice(["type", "type", "delete", "huge", "huge", "truncate", "duplicate"])
        d = copy.deepcopy(doc)
        if kind == "type" and paths:
            p = rng.choice(paths)
            old = get_at(d, p)
            v = other_type(old, rng)
            set_at(d, p, v)
            # null stands for "absent / the default": which type belongs there is unknown,
            # so a value in its place may be valid (GPT-J's n_inner: null -> 7).
            out.append(("type swap" if old is not None else "null replaced", old is not None,
                        json.dumps(d, indent=1), "%s = %r" % (p, v)))
        elif kind == "delete" and paths:
            p = rng.choice([p for p in paths if isinstance(p[-1], str)] or paths)
            parent = get_at(d, p[:-1])
            del parent[p[-1]]
            out.append(("deletion", False, json.dumps(d, indent=1), "del %s" % (p,)))
        elif kind == "huge" and numbers:
            p = rng.choice(numbers)
            v = rng.choice(["-1", "1e308", "-1e308", "1e999", "-1e999", "18446744073709551616e9"])
            set_at(d, p, "@@HUGE@@")
            out.append(("huge/negative number", True,
                        json.dumps(d, indent=1).replace('"@@HUGE@@"', v), "%s = %s" % (p, v)))
        elif kind == "truncate":
            cut = rng.randrange(1, max(2, len(text) - 2))
            out.append(("truncation", True, text[:cut], "cut at %d" % cut))
        elif kind == "duplicate":
            m = [x for x in re.finditer(r'\n(\s*)"([A-Za-z_]+)" ?: ', text)
                 if keys is None or x.group(2) in keys]
            if m:
                x = rng.choice(m)
                dup = '\n%s"%s": 1,' % (x.group(1), x.group(2))
                out.append(("duplicate key", True, text[:x.start()] + dup + text[x.start():],
                            "twice: " + x.group(2)))
    return out


# ---- YAML mutations ------------------------------------------------------------------

VALUE_LINE = re.compile(r'^(\s*-?\s*)([A-Za-z_][A-Za-z_0-9]*):\s+([^#\s][^#]*?)\s*(#.*)?$')


def yaml_mutants(text, rng, n):
    lines = text.split("\n")
    values = [i for i, l in enumerate(lines) if VALUE_LINE.match(l)]
    numeric = [i for i in values
               if re.match(r'^-?[0-9.]', VALUE_LINE.match(lines[i]).group(3))]
    out = []
    for _ in range(n):
        kind = rng.choice(["type", "type", "delete", "huge", "huge", "truncate", "duplicate"])
        ls = list(lines)
        if kind == "type" and values:
            i = rng.choice(values)
            m = VALUE_LINE.match(ls[i])
            v = m.group(3)
            swaps = ["{x: 1}", "[[1, 2], 3]"]
            # A word where a number or a boolean is, a number where a boolean is (a word
            # where a word is may be valid: names, enums).
            if re.match(r'^-?[0-9.]', v):
                swaps += ["seven", "true"]
            elif v in ("true", "false"):
                swaps += ["7", "seven"]
            ls[i] = m.group(1) + m.group(2) + ": " + rng.choice(swaps)
            out.append(("type swap", True, "\n".join(ls), ls[i].strip()))
        elif kind == "delete" and values:
            i = rng.choice(values)
            line = ls.pop(i)
            out.append(("deletion", False, "\n".join(ls), "del " + line.strip()))
        elif kind == "huge" and numeric:
            i = rng.choice(numeric)
            m = VALUE_LINE.match(ls[i])
            v = rng.choice(["-1", "1e999", "-1e999", ".nan", ".inf", "-.inf",
                            "99999999999999999999999"])
            ls[i] = m.group(1) + m.group(2) + ": " + v
            out.append(("huge/negative number", True, "\n".join(ls), ls[i].strip()))
        elif kind == "truncate":
            cut = rng.randrange(1, max(2, len(text) - 2))
            out.append(("truncation", False, text[:cut], "cut at %d" % cut))
        elif kind == "duplicate" and values:
            i = rng.choice(values)
            ls.insert(i + 1, ls[i])
            out.append(("duplicate key", True, "\n".join(ls), "twice: " + ls[i].strip()))
    return out


# ---- the kinds -----------------------------------------------------------------------

def kinds(mpplan, work, env):
    """(name, seeds [(file name, text)], command for PATH, mutate(text, rng, n))."""
    ex = os.path.join(TOP, "examples")
    models = [(f, open(os.path.join(ex, "models", f)).read())
              for f in sorted(os.listdir(os.path.join(ex, "models")))]
    clusters = [(f, open(os.path.join(ex, "clusters", f)).read())
                for f in sorted(os.listdir(os.path.join(ex, "clusters")))]
    plans = [("plan-small.yaml", open(os.path.join(DATA, "plan-small.yaml")).read())]
    shutil.copy(os.path.join(DATA, "model-small.yaml"), work)
    for model, cluster in (("tiny-gpt", "host"), ("llama3-8b", "dgx-h100:2"),
                           ("mixtral-8x7b", "hgx-h200:4"), ("gpt3-175b", "dgx-a100-80g:16")):
        path = os.path.join(work, "seed-%s.yaml" % model)
        run([mpplan, "plan", "-q", "--refine", "0", "-m", model, "-c", cluster, "-o", path], env)
        if os.path.exists(path):
            plans.append((os.path.basename(path), open(path).read()))
    profiles = [("profile-host.yaml", open(os.path.join(DATA, "profile-host.yaml")).read())]
    hfdir = os.path.join(DATA, "hf")
    hfs = [(f, open(os.path.join(hfdir, f)).read()) for f in sorted(os.listdir(hfdir))
           if f.endswith(".json")]
    pred = os.path.join(DATA, "predicted-pp2.json")
    meas = os.path.join(DATA, "measured-pp2.json")
    # The other two predicted kinds, of the same plan: one plan's JSON (verify's
    # predicted-N.json) and a `plan --json` holding it.
    mdoc = json.load(open(meas))
    plan_json = dict(mdoc["plan"], schema_version=1)
    plan_list = {"schema_version": 1, "model": "model-exec", "cluster": "host2",
                 "world_size": 2, "global_batch": 8,
                 "search": {"evaluated": 40, "feasible": 12, "seconds": 0.01},
                 "plans": [mdoc["plan"], mdoc["plan"]]}
    preds = [("predicted.json", open(pred).read()),
             ("predicted-plan.json", json.dumps(plan_json, indent=1)),
             ("predicted-plans.json", json.dumps(plan_list, indent=1))]
    ptrace = os.path.join(DATA, "trace-predicted-pp2.json")
    mtrace = os.path.join(DATA, "trace-measured-pp2.json")
    hk = hf_keys()
    validate = lambda p: [mpplan, "validate", p]
    ym = yaml_mutants
    return [
        ("model YAML", models, validate, ym),
        ("cluster YAML", clusters, validate, ym),
        ("plan YAML", plans, validate, ym),
        ("profile YAML", profiles, validate, ym),
        ("HF config.json", hfs, lambda p: [mpplan, "import", "hf", p],
         lambda t, r, n: json_mutants(t, hk, r, n, HF_OPAQUE)),
        ("measured JSON", [("measured.json", open(meas).read())],
         lambda p: [mpplan, "report", "-p", pred, "-m", p],
         lambda t, r, n: json_mutants(t, ALL, r, n)),
        ("predicted JSON", preds,
         lambda p: [mpplan, "report", "-p", p, "-m", meas],
         lambda t, r, n: json_mutants(t, ALL, r, n)),
        ("measured trace", [("trace.json", open(mtrace).read())],
         lambda p: [mpplan, "report", "-p", pred, "-m", meas, "--predicted-trace", ptrace,
                    "--measured-trace", p, "--html", os.devnull],
         lambda t, r, n: json_mutants(t, ALL, r, n)),
        ("predicted trace", [("trace.json", open(ptrace).read())],
         lambda p: [mpplan, "report", "-p", pred, "-m", meas, "--predicted-trace", p,
                    "--measured-trace", mtrace, "--html", os.devnull],
         lambda t, r, n: json_mutants(t, ALL, r, n)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpplan", default=os.path.join(TOP, "build-asan", "mpplan"))
    ap.add_argument("--per-seed", type=int, default=0, help="mutants per seed")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--per-kind", type=int, default=375,
                    help="mutants per kind when --per-seed is not given (default 375)")
    ap.add_argument("--kinds", help="only the kinds whose name contains one of these "
                    "comma-separated words (e.g. measured,plan)")
    ap.add_argument("--keep", help="copy counted mutants here")
    a = ap.parse_args()
    env = dict(os.environ, G_DEBUG="fatal-criticals", MPPLAN_PROFILE="",
               MPPLAN_DATADIR=os.path.join(TOP, "examples"),
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="mutate-")
    totals = {"mutants": 0, "crash": 0, "critical": 0, "exit 0": 0, "unlocated": 0}
    print("%-16s %7s %6s %8s %7s %9s %s" % ("kind", "mutants", "crash", "critical", "exit 0",
                                           "unlocated", "(accepted, not malformed)"))
    for name, seeds, command, mutate in kinds(a.mpplan, work, env):
        if a.kinds and not any(w in name for w in a.kinds.split(",")):
            continue
        per = a.per_seed or max(1, a.per_kind // len(seeds))
        c = dict.fromkeys(totals, 0)
        benign = 0
        for sname, text in seeds:
            for i, (cls, malformed, mtext, desc) in enumerate(mutate(text, rng, per)):
                ext = ".json" if sname.endswith(".json") else ".yaml"
                path = os.path.join(work, "m-%s-%d%s" % (sname.rsplit(".", 1)[0], i, ext))
                with open(path, "w") as f:
                    f.write(mtext)
                status, out, err = run(command(path), env)
                c["mutants"] += 1
                what = None
                if status >= 128 or status < 0 or "Sanitizer" in err or "runtime error:" in err:
                    what = "crash"
                elif re.search(CRITICAL, err):
                    what = "critical"
                elif status == 0 and malformed:
                    what = "exit 0"
                elif status == 0:
                    benign += 1
                elif status == 2 and not any(line.startswith(f + ":")
                                             for line in err.splitlines()
                                             for f in command(path) if os.path.isfile(f)):
                    what = "unlocated"   # notes may come first: any line naming the file
                if what:
                    c[what] += 1
                    print("  %s: %s %s [%s] exit %d: %s" % (what, sname, cls, desc, status,
                                                            err.strip()[:160]))
                    if a.keep:
                        os.makedirs(a.keep, exist_ok=True)
                        shutil.copy(path, a.keep)
                os.unlink(path)
        print("%-16s %7d %6d %8d %7d %9d %d" % (name, c["mutants"], c["crash"], c["critical"],
                                                c["exit 0"], c["unlocated"], benign))
        for k in totals:
            totals[k] += c[k]
    print("%-16s %7d %6d %8d %7d %9d" % ("all", totals["mutants"], totals["crash"],
                                         totals["critical"], totals["exit 0"],
                                         totals["unlocated"]))
    shutil.rmtree(work)
    return 1 if totals["crash"] or totals["critical"] or totals["exit 0"] else 0


if __name__ == "__main__":
    sys.exit(main())
