"""``skillsearch snapshot create PATH`` and ``skillsearch snapshot restore PATH --data-dir D``.

``create`` copies the global ``--data-dir`` (a server may be serving and writing it meanwhile); ``restore``
takes its target as ``--data-dir`` after the action too (``--data-dir`` before ``snapshot`` works as well),
and checks the snapshot against the model files of the global ``--encoder`` (env ``SKILLSEARCH_ENCODER``;
without one, of the encoder the snapshot's index was built with, as the restored replica will open it).
Neither loads a model. Exit codes: 0 done; 4 the restore was refused and the target is unchanged: the
snapshot is incomplete, altered or built with another model (``error.code`` ``SNAPSHOT_INVALID`` or
``SNAPSHOT_ENCODER_MISMATCH``), or a live process serves or writes the target (``INDEX_NOT_READY`` with
``details.reason`` ``in_use`` and its ``pids``); 1 any other error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from skillsearch.cli.common import Subparsers, add_command, emit, settings_from_args
from skillsearch.cli.usage import UsageError, data_dir_problem, float_range
from skillsearch.core.errors import DataDirInUseError, SnapshotInvalidError, error_json
from skillsearch.service import Catalog

__all__ = ["EXIT_REFUSED", "add_commands"]

EXIT_REFUSED = 4


def _say_removed(paths: list[str], action: str) -> None:
    for path in paths:
        print(f"note: removed {path}, the hidden folder of a snapshot {action} that was killed", file=sys.stderr)


def cmd_create(args: argparse.Namespace, out: TextIO) -> int:
    info = Catalog.create_snapshot(settings_from_args(args), Path(args.path), wait_s=args.wait)
    _say_removed(info.removed_stale, "create")
    for note in info.notes:
        print(f"note: {note}", file=sys.stderr)
    emit(out, args, info.to_dict(), lambda: (
        f"snapshot {info.path}: catalog generation {info.store_generation}, {info.skills} skills,"
        f" {info.documents} indexed, {info.files} files, {info.bytes / 1e6:.1f} MB in {info.seconds:.1f}s"
    ))
    return 0


def cmd_restore(args: argparse.Namespace, out: TextIO) -> int:
    if args.target_dir:
        # The global --data-dir was checked before the command ran; this one is checked the same way (exit 2).
        if (problem := data_dir_problem(args.target_dir)) is not None:
            raise UsageError("skillsearch snapshot restore", problem)
        args.data_dir = args.target_dir
        args.fresh_data_dir = not Path(args.target_dir).exists()  # said of the target, not the global --data-dir
    try:
        info = Catalog.restore_snapshot(settings_from_args(args), Path(args.path))
    except (SnapshotInvalidError, DataDirInUseError) as exc:
        if args.json:
            out.write(error_json(exc) + "\n")
        else:
            print(f"error: {exc.code}: {exc.message} ({args.data_dir} is unchanged)", file=sys.stderr)
        return EXIT_REFUSED
    _say_removed(info.removed_stale, "restore")
    emit(out, args, info.to_dict(), lambda: (
        f"restored {info.snapshot} into {info.data_dir}: catalog generation {info.store_generation},"
        f" {info.skills} skills, {info.documents} indexed, {info.files} files verified in {info.seconds:.1f}s"
    ))
    return 0


def add_commands(sub: Subparsers) -> None:
    p = sub.add_parser("snapshot", help="write or restore a snapshot of a data directory",
                       description="write or restore a snapshot of a data directory")
    actions = p.add_subparsers(dest="snapshot_command", required=True, metavar="ACTION")
    create = add_command(actions, "create", cmd_create,
                         "write a consistent snapshot of --data-dir into the new folder PATH (while it serves)")
    create.add_argument("path", metavar="PATH", help="a new (or empty) folder to write it into")
    create.add_argument("--wait", type=float_range(0, None, "a number of seconds"), default=60.0, metavar="S",
                        help="seconds to wait for the index to catch up with a catalog that is being written"
                             " (default 60); past that the snapshot's index is behind and says so. It bounds"
                             " the wait for the write lock too: a writer holding it all that time fails the"
                             " snapshot (INDEX_NOT_READY, naming its pid)")
    restore = add_command(actions, "restore", cmd_restore,
                          "verify the snapshot PATH and swap it into the data directory D (D unchanged if refused)")
    restore.add_argument("path", metavar="PATH", help="a folder `snapshot create` wrote")
    restore.add_argument("--data-dir", dest="target_dir", metavar="D", default=None,
                         help="the data directory to restore into (default: the global --data-dir)")
