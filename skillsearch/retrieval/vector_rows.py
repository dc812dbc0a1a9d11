"""The vector store's row metadata as a few numpy columns, not a Python object per row.

A :class:`VectorRow` object (an id, two 64-character hashes, interned grant, kind and tags) costs about
400 bytes, and a dict from each id's key to its row about 100 more: 1M rows held about 500 MB of the
serving process's memory in them. :class:`RowTable` keeps the same rows as columns (the ids as one UTF-8
buffer and its offsets, each hash column one fixed-width byte array, grant, kind and tag set as small codes
into their distinct values, a hex hash as its 32 bytes: about 110 bytes a row for ids of 30 characters) and builds a
:class:`VectorRow` only for the row asked for; a row is found by its id's key through ``key_index.KeyIndex``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, overload

import numpy as np

__all__ = ["RowTable", "Texts", "VectorRow", "found_in", "runs"]


@dataclass(frozen=True, slots=True)
class VectorRow:
    """Metadata of one row: whose vector it is, what filters apply, and the hashes that keep it fresh."""

    skill_id: str
    grant: str
    kind: str
    tags: tuple[str, ...]
    doc_hash: str
    embed_hash: str


def _codes(values: Sequence[Any]) -> tuple[tuple[Any, ...], np.ndarray]:
    """The distinct values, sorted, and each value's index among them."""
    names = tuple(sorted(set(values)))
    index = {v: i for i, v in enumerate(names)}
    return names, np.fromiter((index[v] for v in values), dtype=np.int32, count=len(values))


def _extended_codes(names: tuple[Any, ...], codes: np.ndarray, values: Sequence[Any]) -> tuple[tuple[Any, ...],
                                                                                              np.ndarray]:
    """:func:`_codes` of the old values followed by ``values``, from the old codes: when ``values`` bring
    a new name, the names stay sorted and the old codes are renumbered through a lookup array."""
    merged = tuple(sorted(set(names).union(values)))
    if merged != names:
        index = {v: i for i, v in enumerate(merged)}
        codes = np.asarray([index[v] for v in names], dtype=np.int32)[codes] if len(names) else codes
        names = merged
    else:
        index = {v: i for i, v in enumerate(names)}
    extra = np.fromiter((index[v] for v in values), dtype=np.int32, count=len(values))
    return names, np.concatenate([codes, extra]).astype(np.int32, copy=False)


def runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """``rows`` cut into runs of consecutive row numbers: each run's ``(start, stop)`` positions in
    ``rows`` (a copy of a few rows removed from a million is a few slices, not a million-row gather)."""
    breaks = (np.flatnonzero(np.diff(rows) != 1) + 1).tolist()
    return list(zip([0, *breaks], [*breaks, int(rows.size)], strict=True)) if rows.size else []


def found_in(rows: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of the row numbers ``wanted`` are among ``rows`` (both ascending), and each one's position in
    ``rows`` (meaningful where found): where the rows written over a snapshot land after a removal."""
    if not rows.size:
        return np.zeros(wanted.size, bool), np.zeros(wanted.size, np.int64)
    at = np.searchsorted(rows, wanted).clip(0, rows.size - 1)
    return rows[at] == wanted, at


def _kept_codes(names: tuple[Any, ...], codes: np.ndarray) -> tuple[tuple[Any, ...], np.ndarray]:
    """``names`` and ``codes`` without the names no code uses (as :func:`_codes` of the values would be)."""
    used = np.unique(codes)
    if used.size == len(names):
        return names, np.ascontiguousarray(codes, dtype=np.int32)
    lookup = np.full(len(names), -1, dtype=np.int32)
    lookup[used] = np.arange(used.size, dtype=np.int32)
    return tuple(names[i] for i in used.tolist()), lookup[codes]


_HEX = frozenset("0123456789abcdef")


class Texts:
    """A column of short texts (the hashes): lowercase hex of one even length kept as its bytes in a
    ``(n, length / 2)`` uint8 array (a sha256 in 32 bytes, not a 113-byte str); any other texts as one
    fixed-width byte array of their UTF-8."""

    __slots__ = ("data", "hex")

    def __init__(self, texts: Sequence[str]) -> None:
        width = len(texts[0]) if texts else 0
        raw = b""
        if texts and width % 2 == 0 and width > 0 and all(len(t) == width for t in texts):
            joined = "".join(texts)
            try:
                raw = bytes.fromhex(joined)
            except ValueError:
                raw = b""
            if raw.hex() != joined:  # upper case or spaces, which fromhex accepts: not written back alike
                raw = b""
        self.hex = bool(raw)
        if self.hex:
            self.data = np.frombuffer(raw, dtype=np.uint8).reshape(len(texts), width // 2)
        else:
            self.data = np.asarray([t.encode("utf-8") for t in texts], dtype=np.bytes_) if texts else \
                np.zeros(0, "S1")
        self.data.setflags(write=False)

    def __getitem__(self, i: int) -> str:
        return self.data[i].tobytes().hex() if self.hex else bytes(self.data[i]).decode("utf-8")

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def all(self, rows: np.ndarray | None = None) -> list[str]:
        picked = self.data if rows is None else self.data[rows]
        if self.hex:
            return [b.hex() for b in map(bytes, picked)]
        return [bytes(b).decode("utf-8") for b in cast(list[bytes], picked.tolist())]

    def appended(self, texts: Sequence[str]) -> Texts | None:
        """A copy with ``texts`` after these rows, or None when they do not keep this column's layout (a
        hex column given other texts; the caller makes the column again)."""
        if self.hex:
            if not all(self.fits(t) for t in texts):
                return None
            extra = np.frombuffer(bytes.fromhex("".join(texts)), np.uint8).reshape(len(texts), self.data.shape[1])
        else:
            extra = np.asarray([t.encode("utf-8") for t in texts], dtype=np.bytes_)
        return Texts.of_data(np.concatenate([self.data, extra]), self.hex)

    @classmethod
    def of_data(cls, data: np.ndarray, hexed: bool) -> Texts:
        """A column from :attr:`data` as saved (``vector_files.write_rows``): (n, width) uint8 hex bytes, or
        a 1-d fixed-width byte array."""
        if hexed != (data.dtype == np.uint8 and data.ndim == 2) or (not hexed and (data.ndim != 1 or
                                                                                data.dtype.kind != "S")):
            raise ValueError(f"a text column of {data.dtype} {data.shape} is not a {'hex' if hexed else 'byte'} column")
        out = Texts.__new__(Texts)
        out.hex, out.data = hexed, data
        out.data.setflags(write=False)
        return out

    def fits(self, text: str) -> bool:
        """Whether ``text`` can be written in place (same hex width, or no longer than the byte width)."""
        if self.hex:
            return len(text) == 2 * self.data.shape[1] and _HEX.issuperset(text)
        return len(text.encode("utf-8")) <= self.data.dtype.itemsize

    def with_values(self, values: Mapping[int, str]) -> Texts:
        """A copy with these rows' texts replaced (each must :meth:`fits`)."""
        out = Texts.__new__(Texts)
        out.hex, out.data = self.hex, self.data.copy()
        for i, t in values.items():
            out.data[i] = np.frombuffer(bytes.fromhex(t), np.uint8) if self.hex else t.encode("utf-8")
        out.data.setflags(write=False)
        return out

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


class RowTable(Sequence[VectorRow]):
    """Immutable rows, indexable and iterable like a tuple of :class:`VectorRow` (and equal to one)."""

    __slots__ = ("_doc", "_embed", "_id_ends", "_ids", "grant_codes", "grant_names", "kind_codes", "kind_names",
                 "tag_codes", "tag_sets")

    def __init__(self, ids: np.ndarray, id_ends: np.ndarray, grant_names: tuple[str, ...], grant_codes: np.ndarray,
                 kind_names: tuple[str, ...], kind_codes: np.ndarray, tag_sets: tuple[tuple[str, ...], ...],
                 tag_codes: np.ndarray, doc: Texts, embed: Texts) -> None:
        self._ids, self._id_ends = ids, id_ends
        self.grant_names, self.grant_codes = grant_names, grant_codes
        self.kind_names, self.kind_codes = kind_names, kind_codes
        self.tag_sets, self.tag_codes = tag_sets, tag_codes
        self._doc, self._embed = doc, embed
        for a in (ids, id_ends, grant_codes, kind_codes, tag_codes):
            a.setflags(write=False)

    @classmethod
    def of(cls, rows: Iterable[VectorRow]) -> RowTable:
        if isinstance(rows, RowTable):
            return rows
        rows = list(rows)
        return cls.from_columns([r.skill_id for r in rows], [r.grant for r in rows], [r.kind for r in rows],
                                [r.tags for r in rows], [r.doc_hash for r in rows], [r.embed_hash for r in rows])

    @classmethod
    def from_columns(cls, ids: Sequence[str], grants: Sequence[str], kinds: Sequence[str],
                     tags: Sequence[tuple[str, ...]], docs: Sequence[str], embeds: Sequence[str]) -> RowTable:
        encoded = [s.encode("utf-8") for s in ids]
        id_ends = np.cumsum(np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded)))
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        grant_names, grant_codes = _codes(grants)
        kind_names, kind_codes = _codes(kinds)
        tag_sets, tag_codes = _codes([tuple(t) for t in tags])
        return cls(blob, id_ends, grant_names, grant_codes, kind_names, kind_codes,
                   tag_sets, tag_codes, Texts(docs), Texts(embeds))

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The columns as arrays and their names and layout as JSON values (``vector_files.write_rows``):
        :meth:`from_arrays` of both is this table, with no text decoded or parsed per row."""
        arrays = {"ids": self._ids, "id_ends": self._id_ends, "grant_codes": self.grant_codes,
                  "kind_codes": self.kind_codes, "tag_codes": self.tag_codes, "doc": self._doc.data,
                  "embed": self._embed.data}
        names = {"grants": list(self.grant_names), "kinds": list(self.kind_names),
                 "tag_sets": [list(t) for t in self.tag_sets], "doc_hex": self._doc.hex, "embed_hex": self._embed.hex}
        return arrays, names

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], names: Mapping[str, Any]) -> RowTable:
        """The table :meth:`arrays` gave, checked: every column as long as the ids, the id offsets rising to
        the end of their buffer, every code naming a value (a ValueError otherwise)."""
        ends = np.asarray(arrays["id_ends"])
        n = int(ends.size)
        ids = np.asarray(arrays["ids"])
        if ids.dtype != np.uint8 or ends.dtype != np.int64 or ends.ndim != 1 or \
                (n and (int(ends[-1]) != ids.size or int(ends[0]) < 0 or bool((np.diff(ends) < 0).any()))):
            raise ValueError("the saved ids do not match their offsets")
        grant_names, kind_names = tuple(map(str, names["grants"])), tuple(map(str, names["kinds"]))
        tag_sets = tuple(tuple(map(str, t)) for t in names["tag_sets"])
        coded = []
        for key, count in (("grant_codes", len(grant_names)), ("kind_codes", len(kind_names)),
                           ("tag_codes", len(tag_sets))):
            codes = np.asarray(arrays[key])
            if codes.dtype != np.int32 or codes.shape != (n,) or (n and not 0 <= int(codes.min()) <= int(codes.max())
                                                                     < count):
                raise ValueError(f"the saved {key} do not match their {count} values")
            coded.append(codes)
        doc = Texts.of_data(np.asarray(arrays["doc"]), bool(names["doc_hex"]))
        embed = Texts.of_data(np.asarray(arrays["embed"]), bool(names["embed_hex"]))
        if len(doc) != n or len(embed) != n:
            raise ValueError("the saved hash columns do not match the rows")
        return cls(ids, ends, grant_names, coded[0], kind_names, coded[1], tag_sets, coded[2], doc, embed)

    # -- reading ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._id_ends.size)

    def skill_id(self, i: int) -> str:
        start = int(self._id_ends[i - 1]) if i > 0 else 0
        return self._ids[start : int(self._id_ends[i])].tobytes().decode("utf-8")

    def skill_ids(self) -> list[str]:
        """Every row's id, in row order (one decode of the whole buffer)."""
        text = self._ids.tobytes()
        starts = [0, *self._id_ends[:-1].tolist()] if len(self) else []
        return [text[a:b].decode("utf-8") for a, b in zip(starts, self._id_ends.tolist(), strict=True)]

    def _row(self, i: int) -> VectorRow:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        return VectorRow(self.skill_id(i), self.grant_names[self.grant_codes[i]], self.kind_names[self.kind_codes[i]],
                         self.tag_sets[self.tag_codes[i]], self._doc[i], self._embed[i])

    @overload
    def __getitem__(self, i: int) -> VectorRow: ...
    @overload
    def __getitem__(self, i: slice) -> list[VectorRow]: ...
    def __getitem__(self, i: int | slice) -> VectorRow | list[VectorRow]:
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        return self._row(int(i))

    def __iter__(self) -> Iterator[VectorRow]:
        return (self._row(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RowTable({len(self)} rows)"

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self._ids, self._id_ends, self.grant_codes, self.kind_codes,
                                           self.tag_codes)) + self._doc.nbytes + self._embed.nbytes

    # -- changed copies -----------------------------------------------------------------------------

    def replaced(self, changes: Mapping[int, VectorRow]) -> RowTable:
        """These rows replaced by rows of the same id (the usual update: only the hashes and, rarely, the
        filters change); the ids are shared with this table, the other columns copied."""
        if not changes:
            return self
        if any(self.skill_id(i) != r.skill_id for i, r in changes.items()):
            raise ValueError("a replaced row must keep its id")
        known = all(r.grant in self.grant_names and r.kind in self.kind_names and r.tags in self.tag_sets and
                    self._doc.fits(r.doc_hash) and self._embed.fits(r.embed_hash) for r in changes.values())
        if not known:  # a new grant, kind or tag set, or a longer hash: the columns are made again
            columns = self._columns(np.arange(len(self)))
            for i, r in changes.items():
                for column, value in zip(columns, (r.skill_id, r.grant, r.kind, r.tags, r.doc_hash, r.embed_hash),
                                         strict=True):
                    column[i] = value  # type: ignore[index]
            return RowTable.from_columns(*columns)
        grants, kinds, tags = self.grant_codes.copy(), self.kind_codes.copy(), self.tag_codes.copy()
        for i, r in changes.items():
            grants[i], kinds[i] = self.grant_names.index(r.grant), self.kind_names.index(r.kind)
            tags[i] = self.tag_sets.index(r.tags)
        doc = self._doc.with_values({i: r.doc_hash for i, r in changes.items()})
        embed = self._embed.with_values({i: r.embed_hash for i, r in changes.items()})
        return RowTable(self._ids, self._id_ends, self.grant_names, grants, self.kind_names, kinds, self.tag_sets,
                        tags, doc, embed)

    def take(self, rows: np.ndarray) -> RowTable:
        """The table of these rows, in this order: the ids copied a run of consecutive rows at a time, the
        other columns gathered, a grant, kind or tag set no row keeps dropped (no text decoded)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return RowTable.of([])
        starts = np.concatenate([np.zeros(1, np.int64), self._id_ends[:-1]])
        ids = np.concatenate([self._ids[starts[rows[a]] : self._id_ends[rows[b - 1]]] for a, b in runs(rows)])
        grant_names, grant_codes = _kept_codes(self.grant_names, self.grant_codes[rows])
        kind_names, kind_codes = _kept_codes(self.kind_names, self.kind_codes[rows])
        tag_sets, tag_codes = _kept_codes(self.tag_sets, self.tag_codes[rows])
        return RowTable(ids, np.cumsum(self._id_ends[rows] - starts[rows]), grant_names, grant_codes, kind_names,
                        kind_codes, tag_sets, tag_codes, Texts.of_data(self._doc.data[rows], self._doc.hex),
                        Texts.of_data(self._embed.data[rows], self._embed.hex))

    def extended(self, rows: Sequence[VectorRow]) -> RowTable:
        """This table with ``rows`` appended: each column's arrays joined, the codes of a new grant, kind or
        tag set renumbered through a lookup (about 10 ms at 1M rows, where making the columns again from
        Python lists took seconds); made again only when a hash column changes layout, or this is empty."""
        if not rows:
            return self
        doc = self._doc.appended([r.doc_hash for r in rows]) if len(self) else None
        embed = self._embed.appended([r.embed_hash for r in rows]) if doc is not None else None
        if doc is not None and embed is not None:
            encoded = [r.skill_id.encode("utf-8") for r in rows]
            ends = int(self._id_ends[-1]) + np.cumsum(np.fromiter(map(len, encoded), np.int64, count=len(rows)))
            blob = np.concatenate([self._ids, np.frombuffer(b"".join(encoded), np.uint8)])
            grant_names, grant_codes = _extended_codes(self.grant_names, self.grant_codes, [r.grant for r in rows])
            kind_names, kind_codes = _extended_codes(self.kind_names, self.kind_codes, [r.kind for r in rows])
            tag_sets, tag_codes = _extended_codes(self.tag_sets, self.tag_codes, [tuple(r.tags) for r in rows])
            return RowTable(blob, np.concatenate([self._id_ends, ends]), grant_names, grant_codes, kind_names,
                            kind_codes, tag_sets, tag_codes, doc, embed)
        ids, grants, kinds, tags, docs, embeds = self._columns(np.arange(len(self)))
        return RowTable.from_columns(ids + [r.skill_id for r in rows], grants + [r.grant for r in rows],
                                     kinds + [r.kind for r in rows], tags + [r.tags for r in rows],
                                     docs + [r.doc_hash for r in rows], embeds + [r.embed_hash for r in rows])

    def _columns(self, rows: np.ndarray) -> tuple[list[str], list[str], list[str], list[tuple[str, ...]], list[str],
                                                    list[str]]:
        every = self.skill_ids()
        return ([every[i] for i in rows.tolist()], [self.grant_names[c] for c in self.grant_codes[rows].tolist()],
                [self.kind_names[c] for c in self.kind_codes[rows].tolist()],
                [self.tag_sets[c] for c in self.tag_codes[rows].tolist()],
                self._doc.all(rows), self._embed.all(rows))
