#!/usr/bin/env python3
"""Long-running fuzzer of the ttlc front end (``make fuzz``).

Generates inputs with the generators of ``tests/python/test_fuzz.py`` (token soup,
syntax-directed random programs, mutations of the seed programs and of the peer corpus)
from a fixed seed, and checks the same properties:

* ``ttlc.check(text)`` returns or raises ``ttlc.CompileError`` -- nothing else;
* for every input that parses, printing is a fixed point, and for every input that
  ``check`` accepts, the printed text is accepted again.

Input number i is a pure function of (--seed, i), so any finding can be regenerated
with ``--only i``.  Work is spread over --jobs processes.  Every finding is saved to
fuzz/crashes/ (the input as ``<id>.ir``, the traceback as ``<id>.txt``), one file pair
per distinct failure site.  Exits 1 when something was found.

    python fuzz/fuzz_frontend.py --inputs 100000 [--jobs 2] [--seed 0]
    python fuzz/fuzz_frontend.py --replay fuzz/crashes/<id>.ir
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

import test_fuzz as lib  # noqa: E402  (seeds, vocabulary, generators, the property)

#: the mix of generators, by weight
MIX = (("mutate-seed", 35), ("mutate-corpus", 20), ("program", 25), ("soup", 20))
#: an input taking longer than this (seconds) is reported as a hang
HANG_SECONDS = 10.0
#: and one taking longer than this is listed as slow (not a failure)
SLOW_SECONDS = 1.0


class Hang(Exception):
    pass


def make_input(seed: int, index: int, seeds, corpus):
    """Input number ``index``: (generator name, text or bytes)."""
    rnd = random.Random(f"{seed}:{index}")
    c = lib.RandomChooser(rnd)
    total = sum(w for _, w in MIX)
    pick = rnd.randrange(total)
    for kind, weight in MIX:
        if pick < weight:
            break
        pick -= weight
    if kind == "mutate-corpus" and not corpus:
        kind = "mutate-seed"
    if kind == "mutate-seed":
        return kind, lib.mutate(c, c.choice(seeds), max_steps=c.choice([1, 1, 2, 3, 6]))
    if kind == "mutate-corpus":
        return kind, lib.mutate(c, c.choice(corpus), max_steps=c.choice([1, 1, 2, 3, 6]))
    if kind == "program":
        return kind, lib.random_program(c)
    return kind, lib.token_soup(c)


def _site(exc: BaseException) -> str:
    """Where an exception was raised: type plus innermost frame inside ttlc."""
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if "/ttlc/" in f.filename] or tb
    last = frames[-1] if frames else None
    where = f"{Path(last.filename).name}:{last.lineno}:{last.name}" if last else "?"
    if isinstance(exc, lib.PropertyViolation):
        return f"PropertyViolation:{str(exc).splitlines()[0][:60]}"
    return f"{type(exc).__name__}@{where}"


_STATE = {}


def _init_worker(seed, seeds, corpus):
    _STATE.update(seed=seed, seeds=seeds, corpus=corpus)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))

    def on_alarm(signum, frame):
        raise Hang(f"input took more than {HANG_SECONDS:.0f} s")

    signal.signal(signal.SIGALRM, on_alarm)


def run_range(bounds):
    """Run inputs [lo, hi); returns counts, findings and slow inputs."""
    lo, hi = bounds
    counts = Counter()
    findings = []
    slow = []
    for i in range(lo, hi):
        kind, text = make_input(_STATE["seed"], i, _STATE["seeds"], _STATE["corpus"])
        counts["inputs"] += 1
        counts[f"gen:{kind}"] += 1
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
        try:
            outcome = lib.check_frontend(text)
            signal.setitimer(signal.ITIMER_REAL, 0)
            counts[outcome] += 1
            counts[f"{kind}:{outcome}"] += 1
        except BaseException as e:  # noqa: BLE001 -- everything is a finding here
            signal.setitimer(signal.ITIMER_REAL, 0)
            if isinstance(e, KeyboardInterrupt):
                raise
            counts["findings"] += 1
            findings.append((i, kind, _site(e), "".join(traceback.format_exception(e)), text))
        dt = time.perf_counter() - t0
        if dt > SLOW_SECONDS:
            slow.append((i, kind, dt))
    return counts, findings, slow


def save_finding(out_dir: Path, index, kind, site, tb, text) -> Path:
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    ident = hashlib.sha1(site.encode()).hexdigest()[:12]
    out_dir.mkdir(parents=True, exist_ok=True)
    ir = out_dir / f"{ident}.ir"
    # keep the smallest reproducer per failure site
    if not ir.exists() or len(data) < ir.stat().st_size:
        ir.write_bytes(data)
        (out_dir / f"{ident}.txt").write_text(
            f"site: {site}\ninput #{index} ({kind}), {len(data)} bytes\n\n{tb}", encoding="utf-8")
    return ir


def replay(path: str) -> int:
    data = Path(path).read_bytes()
    try:
        outcome = lib.check_frontend(data)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        return 1
    print(f"{path}: {outcome} (no crash)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=10000, help="number of inputs (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="worker processes (default 2)")
    ap.add_argument("--only", type=int, metavar="I", help="run input number I alone and print it")
    ap.add_argument("--replay", metavar="FILE", help="run the front end on a saved input")
    ap.add_argument("--out", default=str(HERE / "crashes"), help="where findings go")
    ap.add_argument("--no-corpus", action="store_true", help="do not read the peer corpus")
    args = ap.parse_args(argv)

    if args.replay:
        return replay(args.replay)

    seeds = list(lib.SEEDS.values())
    corpus = [] if args.no_corpus else sorted(lib.corpus_texts().values())
    if args.only is not None:
        kind, text = make_input(args.seed, args.only, seeds, corpus)
        print(f"--- input #{args.only} ({kind}):\n{text!r}\n---")
        try:
            print(lib.check_frontend(text))
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            return 1
        return 0

    print(f"fuzzing the ttlc front end: {args.inputs} inputs, seed {args.seed}, "
          f"{args.jobs} job(s), {len(seeds)} seeds, {len(corpus)} corpus files", flush=True)
    chunk = 250
    ranges = [(lo, min(lo + chunk, args.inputs)) for lo in range(0, args.inputs, chunk)]
    totals = Counter()
    findings = {}
    slow = []
    t0 = time.perf_counter()
    last_report = t0
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    with ctx.Pool(args.jobs, initializer=_init_worker, initargs=(args.seed, seeds, corpus)) as pool:
        for counts, found, slow_here in pool.imap_unordered(run_range, ranges):
            totals.update(counts)
            slow.extend(slow_here)
            for index, kind, site, tb, text in found:
                path = save_finding(Path(args.out), index, kind, site, tb, text)
                if site not in findings:
                    print(f"!! {site}: input #{index} ({kind}) -> {path}", flush=True)
                findings.setdefault(site, []).append(index)
            now = time.perf_counter()
            if now - last_report > 15:
                last_report = now
                rate = totals["inputs"] / (now - t0)
                print(f"   {totals['inputs']:>8} inputs, {rate:,.0f}/s, "
                      f"{totals['findings']} findings", flush=True)
    elapsed = time.perf_counter() - t0

    n = totals["inputs"]
    print()
    print(f"inputs           {n:>9}   in {elapsed:.1f} s ({n / elapsed:,.0f} inputs/s)")
    for kind, _ in MIX:
        if totals[f"gen:{kind}"]:
            detail = ", ".join(f"{totals[f'{kind}:{o}']} {o}" for o in ("accepted", "invalid", "unparsable"))
            print(f"  {kind:<15}{totals[f'gen:{kind}']:>9}   ({detail})")
    print(f"accepted         {totals['accepted']:>9}   (check passed, printed text accepted again)")
    print(f"invalid          {totals['invalid']:>9}   (parsed, print fixed point, verifier rejected)")
    print(f"unparsable       {totals['unparsable']:>9}   (parser rejected with diagnostics)")
    print(f"findings         {totals['findings']:>9}   ({len(findings)} distinct)")
    for site, indices in sorted(findings.items()):
        print(f"  {site}: {len(indices)} input(s), e.g. #{indices[0]}")
    if slow:
        slow.sort(key=lambda s: -s[2])
        print(f"slow inputs (> {SLOW_SECONDS:.0f} s): {len(slow)}; slowest: "
              + ", ".join(f"#{i} ({k}) {dt:.1f}s" for i, k, dt in slow[:5]))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
