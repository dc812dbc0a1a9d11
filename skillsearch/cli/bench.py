"""``skillsearch bench relevance|latency``: the benchmark harness of ``skillsearch/bench`` (needs the
``bench`` extra); results go to ``benchmarks/results/``."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import TextIO

from skillsearch.cli.common import Command, Subparsers, emit, progress_factory
from skillsearch.cli.termination import EXIT_TERMINATED
from skillsearch.cli.usage import UsageError, float_range, int_range
from skillsearch.core.errors import ValidationError
from skillsearch.core.fusion import FUSIONS
from skillsearch.core.settings import Settings

__all__ = ["BENCH_EXTRA", "add_commands"]

# The top-level modules of the ``bench`` extra (pyproject.toml): one missing is said as the extra to install.
DATA_ROOT = "../shared/data"  # the default --data-root, relative to the current folder (the repository root's sibling)
BENCH_EXTRA = frozenset({"bm25s", "Stemmer", "pytrec_eval", "matplotlib", "sklearn"})


def skills_arg(text: str) -> str:
    """``type=`` of ``bench latency --skills``: comma-separated catalog sizes (1 or more) or ``real``."""
    bad = [c for c in text.split(",") if c and c != "real" and not (c.isdigit() and int(c) >= 1)]
    if bad or not text.strip(","):
        raise argparse.ArgumentTypeError(f"give numbers of synthetic skills (1 or more) or 'real', got {text!r}")
    return text


def tag_arg(text: str) -> str:
    """``type=`` of ``--tag``: one safe part of a file name (letters, digits, ``.``, ``_``, ``-``, ``+``; at most
    64). ``+`` stays allowed: encoder names hold it, and so do committed result stems (``latency-1m-minilm+e5``)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a file-name part: give up to 64 letters, digits, '.', '_', '-' or '+', starting"
            " with a letter or digit")
    return text


def check_out(args: argparse.Namespace) -> None:
    """Unless ``--no-save``: make ``--out`` (a folder) and prove a file can be written there, before the run,
    so a long run never ends in a folder its results cannot go to."""
    if args.no_save:
        return
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"skillsearch bench {args.bench_command}",
                         f"argument --out: cannot write results to {args.out}: {exc.strerror or exc}") from None


class BenchTerminated(SystemExit):
    """SIGTERM during a benchmark: unwinds like Ctrl-C, so its temporary catalogs are removed (``timeout``'s
    default signal left ``/tmp/skillsearch-bench-*`` behind, a 1M-skill latency run's gigabytes), and a
    latency run's search child is killed by ``subprocess.run`` on the way out. Exit status 143."""

    def __init__(self) -> None:
        super().__init__(EXIT_TERMINATED)


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once
    print("terminated", file=sys.stderr, flush=True)
    raise BenchTerminated


def needs_bench_extra(func: Command) -> Command:
    """``func`` with a missing module of the ``bench`` extra said as what to install (exit 1), not as
    ``INTERNAL: ModuleNotFoundError``; SIGTERM unwinds it (:class:`BenchTerminated`)."""

    def run(args: argparse.Namespace, out: TextIO) -> int:
        main_thread = threading.current_thread() is threading.main_thread()
        before = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
        try:
            return func(args, out)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in BENCH_EXTRA:
                raise
            print(f"error: skillsearch bench needs the 'bench' extra (no module {exc.name!r}): "
                  "pip install 'skillsearch[bench]'", file=sys.stderr)
            return 1
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, before)

    return run


def cmd_bench_relevance(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.bench.relevance import ALL_MODES, RelevanceOptions, run_relevance, test_split_overrides
    from skillsearch.bench.report import to_markdown, write_results
    from skillsearch.bench.skills_cli import is_skills_dataset, skills_command

    overrides = {k: v for k, v in (("encoder", args.encoder), ("fusion", args.fusion),
                                   ("semantic_weight", args.semantic_weight),
                                   ("embed_instructions_chars", args.embed_instructions_chars),
                                   ("lexical_instructions_chars", args.lexical_instructions_chars)) if v is not None}
    if is_skills_dataset(Path(args.dataset)):
        given = [name for name, value in (("--max-queries", args.max_queries), ("--modes", args.modes),
                                          ("--canonical", args.canonical),
                                          ("--split", args.split not in (None, "dev"))) if value]
        if given:  # they were ignored: 10 lexical requests asked, all 260 run in hybrid (audit)
            raise UsageError("skillsearch bench relevance", f"argument {given[0]}: a skills folder's dev set runs"
                             " every request of its queries.dev.jsonl in every mode; --max-queries, --modes,"
                             " --canonical and a --split other than dev apply to BEIR folders only")
        check_out(args)
        return skills_command(args, out, overrides, progress_factory(not args.quiet))
    check_out(args)
    args.split = args.split or "test"
    if tuned := test_split_overrides(args.split, overrides):
        # Not refused: an engineer may reproduce a published configuration; the report records it too.
        flags = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in tuned.items())
        print(f"warning: {flags} on the {args.split} split: ranking settings are tuned on dev (--split dev); the"
              " report records these overrides (test_split_overrides)", file=sys.stderr, flush=True)
    modes = [m for chunk in (args.modes or [",".join(ALL_MODES)]) for m in chunk.split(",") if m]
    options = RelevanceOptions(
        dataset=Path(args.dataset), split=args.split, modes=modes, max_queries=args.max_queries,
        cache_dir=None if args.no_cache else Path(args.cache_dir), settings=overrides,
        command="skillsearch " + " ".join(sys.argv[1:]) if args.record_command else None,
    )
    try:
        report = run_relevance(options, progress=progress_factory(not args.quiet))
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    if not args.no_save:
        # A run over the first N queries is not the split's result: it takes the split's own name only when
        # asked (--canonical: the documented MetaTool run over its first 3,000 test queries).
        partial = f"-partial-{args.max_queries}" if args.max_queries and not args.canonical else ""
        stem = f"relevance-{report['dataset']}-{args.split}{partial}" + (f"-{args.tag}" if args.tag else "")
        report["files"] = [str(p) for p in write_results(report, Path(args.out), stem)]
    emit(out, args, report, lambda: to_markdown(report))
    return 0


def cmd_bench_latency(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.bench.latency import missing_data, run_latency
    from skillsearch.bench.report import to_markdown, write_results
    from skillsearch.retrieval import int8_kernels

    catalogs = [c for chunk in args.skills for c in chunk.split(",") if c]
    try:
        int8_kernels.check(args.scan_kernel, args.numkong_only, args.kernel_path)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    data_root = Path(args.data_root)
    if missing := missing_data(data_root, catalogs):
        raise ValidationError(
            f"--data-root {args.data_root} lacks {', '.join(missing)} (the latency run times real requests and"
            f" skill texts; the default, {DATA_ROOT}, is relative to the current folder ({os.getcwd()}): run from"
            " the repository root, or give --data-root or SKILLSEARCH_BENCH_DATA)")
    check_out(args)
    report = run_latency(
        catalogs, data_root=data_root,
        cache_dir=None if args.no_cache else Path(args.cache_dir), queries=args.queries,
        stand_in_above=args.stand_in_above, encoder_name=args.encoder or "minilm",
        command="skillsearch " + " ".join(sys.argv[1:]),
        log=(lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
        scan_kernel=args.scan_kernel, numkong_only=args.numkong_only, kernel_path=args.kernel_path,
    )
    if not args.no_save:
        stem = "latency" + (f"-{args.tag}" if args.tag else "")
        report["files"] = [str(p) for p in write_results(report, Path(args.out), stem)]
    emit(out, args, report, lambda: to_markdown(report))
    return 0


def cmd_bench_lodo(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.bench.lodo_data import DATASETS, missing_sets
    from skillsearch.bench.lodo_report import lodo_markdown, run_lodo, saved_set
    from skillsearch.bench.report import write_results

    names = [n for chunk in args.sets for n in chunk.split(",") if n] if args.sets else list(DATASETS)
    unknown = sorted(set(names) - set(DATASETS))
    if unknown or len(names) < 2:
        raise ValidationError(f"--sets takes two or more of {', '.join(DATASETS)}, got {names}")
    if len(set(names)) < len(names):
        raise UsageError("skillsearch bench lodo", f"argument --sets: a set is named twice: {names}")
    if args.encoder not in (None, "minilm"):  # it ran MiniLM whatever --encoder said
        raise UsageError("skillsearch bench lodo", f"argument --encoder: the dev sets are searched with minilm (their"
                         f" English requests take MiniLM's route under the default minilm+e5 too), not {args.encoder}:"
                         " leave out --encoder")
    if args.write_decision:
        # The shipped decision is every index's: it is fitted on all four sets, and written with its report.
        if set(names) != set(DATASETS):
            raise UsageError("skillsearch bench lodo", "argument --write-decision: the shipped decision is fitted on"
                             f" all four sets ({', '.join(DATASETS)}); this run has only {', '.join(names)}"
                             " (leave out --sets)")
        if args.no_save:
            raise UsageError("skillsearch bench lodo", "argument --write-decision: not allowed with --no-save (a"
                             " shipped decision is written with the report it was fitted in)")
    # Before any work (a set found missing at the end cost the others' minutes); a set --reuse finds kept
    # needs no data.
    to_collect = [n for n in names if not (args.reuse and saved_set(Path(args.cache_dir), n).is_file())]
    if missing := missing_sets(Path(args.data_root), to_collect):
        raise ValidationError(f"--data-root {args.data_root} lacks {', '.join(missing)} (the dev sets of"
                              f" {', '.join(to_collect)}; the default, {DATA_ROOT}, is relative to the current folder"
                              f" ({os.getcwd()}): run from the repository root, or give --data-root or"
                              " SKILLSEARCH_BENCH_DATA)")
    check_out(args)
    report = run_lodo(Path(args.data_root), Path(args.cache_dir), reuse=args.reuse, names=names,
                      command="skillsearch " + " ".join(sys.argv[1:]),
                      log=(lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
                      progress=progress_factory(not args.quiet))
    if args.write_decision:
        from skillsearch.bench.decision import write_decision

        write_decision(report["decision"]["model"])
    if not args.no_save:
        stem = "lodo-dev" + (f"-{args.tag}" if args.tag else "")
        report["files"] = [str(p) for p in write_results(report, Path(args.out), stem, lodo_markdown,
                                                          lambda _r, _p: None)[:2]]
    emit(out, args, report, lambda: lodo_markdown(report))
    return 0


def add_commands(sub: Subparsers) -> None:
    bench = sub.add_parser("bench", help="relevance and latency benchmarks (needs the 'bench' extra)",
                           description="Relevance and latency benchmarks; results go to benchmarks/results/.")
    inner = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--out", default="benchmarks/results", help="folder for the .md/.json/.png results (default %(default)s)")
        p.add_argument("--no-save", action="store_true", help="print only, write no result files")
        p.add_argument("--tag", type=tag_arg, help="suffix for the result file names (up to 64 letters, digits, . _ -"
                                                   " +; default: none)")
        p.add_argument("--cache-dir", default="benchmarks/.cache", help="on-disk embedding cache (default %(default)s)")
        p.add_argument("--no-cache", action="store_true", help="encode everything, cache nothing")

    p = inner.add_parser("relevance", help="nDCG@10, Recall@10/50, MRR@10, P@1 on a BEIR-layout folder")
    p.set_defaults(func=needs_bench_extra(cmd_bench_relevance), record_command=True)
    common(p)
    p.add_argument("--dataset", required=True, help="folder with corpus.jsonl, queries.jsonl, qrels.<split>.tsv"
                   " (searched with minilm unless --encoder is given before 'bench'), or a folder of skills with"
                   " queries.dev.jsonl (the skills dev set, searched with the default encoder, minilm+e5)")
    p.add_argument("--split", choices=["dev", "test", "all"],
                   help="a BEIR folder's qrels split (default test); a skills folder runs its dev set only")
    p.add_argument("--modes", action="append", metavar="M,M",
                   help="modes to run (default all): lexical, semantic, hybrid, hybrid-<fusion>, bm25s")
    p.add_argument("--max-queries", type=int_range(1, what="a number of queries"),
                   help="only the first N judged queries by id (results are written"
                   " as relevance-<dataset>-<split>-partial-N unless --canonical; default: every judged query)")
    p.add_argument("--canonical", action="store_true",
                   help="with --max-queries: write under the split's own name (the documented sample run)")
    p.add_argument("--fusion", choices=list(FUSIONS), help=f"override the default fusion (default {Settings.fusion})")
    p.add_argument("--semantic-weight", type=float_range(0, 1, "a weight"),
                   help=f"override the default semantic weight (0 to 1; default {Settings.semantic_weight}, moved per request)")
    p.add_argument("--embed-instructions-chars", type=int_range(0, what="a number of characters"), metavar="N",
                   help="override how many characters of a skill's instructions are embedded with its description"
                        f" (default {Settings.embed_instructions_chars})")
    p.add_argument("--lexical-instructions-chars", type=int_range(0, what="a number of characters"), metavar="N",
                   help="override how many characters of a skill's instructions BM25 weighs with its description"
                        f" (0: all of them; default {Settings.lexical_instructions_chars})")

    p = inner.add_parser("lodo", help="leave-one-dataset-out ablation of every ranking rule, and the decision's fit",
                         description="Searches the four dev sets once, then scores every rule variant on each set"
                                     " when chosen on the others, and fits the decision the same way.")
    p.set_defaults(func=needs_bench_extra(cmd_bench_lodo))
    common(p)
    p.add_argument("--data-root", default=os.environ.get("SKILLSEARCH_BENCH_DATA", DATA_ROOT),
                   help="folder with metatool/, sealtools/, gorilla/, skills-catalog/ (default: %(default)s, relative"
                        " to the current folder; env SKILLSEARCH_BENCH_DATA)")
    p.add_argument("--reuse", action="store_true", help="reuse the retriever outputs the last run kept in the cache")
    p.add_argument("--sets", action="append", metavar="S,S",
                   help="dev sets to use (default all): metatool, sealtools, skills, gorilla")
    p.add_argument("--write-decision", action="store_true",
                   help="ship the decision fitted on all four sets (skillsearch/retrieval/decisions.json);"
                        " refused with --sets naming fewer than all four, and with --no-save")

    p = inner.add_parser(
        "latency", help="search/encode percentiles, build throughput, update time, RSS",
        description="Build, update and search synthetic catalogs (or the 883 real skills) and time each step. "
        "The encoder is the global --encoder (before 'bench'), minilm when none is given: "
        "`skillsearch --encoder minilm+e5 bench latency ...` measures the default encoder, its e5 route "
        "on the skills dev set's requests in other languages.")
    p.set_defaults(func=needs_bench_extra(cmd_bench_latency))
    common(p)
    p.add_argument("--skills", action="append", required=True, metavar="N|real", type=skills_arg,
                   help="catalog size (repeatable or comma-separated); 'real' = the 883 real skills")
    p.add_argument("--data-root", default=os.environ.get("SKILLSEARCH_BENCH_DATA", DATA_ROOT),
                   help="folder with metatool/, sealtools/ (their queries.jsonl and corpus.jsonl: requests and"
                        " the synthetic skills' sentences) and, for --skills real, skills-catalog/; refused when"
                        " any is missing (default: %(default)s, relative to the current folder)")
    p.add_argument("--queries", type=int_range(3, what="a number of queries"), default=300,
                   help="queries per run, split over the three search modes (3 or more; default %(default)s)")
    p.add_argument("--stand-in-above", type=int_range(0, what="a number of skills"), default=20_000,
                   help="above this size in skills, uncached texts get stand-in vectors instead of being encoded"
                        " (default %(default)s)")
    p.add_argument("--scan-kernel", metavar="KERNEL",
                   help="the vector stage's int8 kernel in the search process: int8dots, numkong-packed or "
                        "numkong-cdist (default: this core's choice)")
    p.add_argument("--numkong-only", nargs="+", metavar="CAPABILITY", default=[],
                   help="hold numkong to these capabilities in the search process ('haswell': its AVX2 kernels;"
                        " default: every one this core has)")
    p.add_argument("--kernel-path", metavar="PATH",
                   help="hold our int8 kernel to this path in the search process: avx512vnni, avx2 or portable "
                        "(with --numkong-only haswell, --kernel-path avx2 runs and chooses as an AVX2-only core;"
                        " default: this core's best)")
