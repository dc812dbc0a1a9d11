"""The index on disk: reopened it answers the same, a model mismatch is refused, a corrupt folder is a clear
error that leaves the catalog alone, a stale index is repaired, and only changed skills are re-embedded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skillsearch.catalog.rows import IndexRow
from skillsearch.core.domain import Principal
from skillsearch.core.errors import IndexMismatchError, IndexNotReadyError
from skillsearch.core.settings import Settings
from skillsearch.retrieval import vector_saves, vector_updates
from skillsearch.retrieval import vectors as vectors_module
from skillsearch.retrieval.cosines import TINY, max_cosines, zero_tiny
from skillsearch.retrieval.documents import embedded_text, split_instructions
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot
from skillsearch.service import Catalog

OPERATOR = Principal.operator()
QUERIES = ["roll back a bad deploy", "clean a pandas dataframe", "証明書", "write a changelog entry"]


def answers(catalog: Catalog) -> list[list[tuple[str, float]]]:
    return [[(h.skill.skill_id, round(h.score, 5)) for h in catalog.search(OPERATOR, SearchRequest(q)).hits]
            for q in QUERIES]


def vectors_by_skill(catalog: Catalog) -> dict[str, np.ndarray]:
    vectors = catalog.index().snapshot().vectors
    return {row.skill_id: vectors.matrix[i].copy() for i, row in enumerate(vectors.rows)}


def llamas(catalog: Catalog) -> list[tuple[str, float]]:
    hits = catalog.search(OPERATOR, SearchRequest("feeding llamas", mode="semantic", limit=1)).hits
    return [(h.skill.slug, round(h.score, 5)) for h in hits]


def test_an_index_reopened_from_disk_answers_the_same(fresh_sample: Catalog, encoder: Encoder) -> None:
    before = answers(fresh_sample)
    fresh_sample.close()
    reopened = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    assert reopened.index().embed_count == 0
    assert answers(reopened) == before


def test_an_index_built_with_another_model_is_refused_until_reindexed(fresh_sample: Catalog) -> None:
    fresh_sample.close()
    other = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=HashingEncoder())
    with pytest.raises(IndexMismatchError) as info:
        other.index()
    assert "all-MiniLM-L6-v2" in info.value.message and "skillsearch" in info.value.message
    assert "reindex" in info.value.message
    stats = other.reindex()
    assert stats.embedded == other.store.count("active")
    assert other.search(OPERATOR, SearchRequest("git bisect", mode="lexical")).hits


def test_an_index_opened_with_another_share_of_the_instructions_embeds_every_skill_again(
        fresh_sample: Catalog, encoder: Encoder, caplog: pytest.LogCaptureFixture) -> None:
    """The manifest records how much of each skill's instructions its vectors embed; opening it with another
    ``embed_instructions_chars`` must not mix two embedded texts in one matrix."""
    built = fresh_sample.settings.embed_instructions_chars
    other_count = 600 if built == 0 else 0
    before = vectors_by_skill(fresh_sample)
    with_instructions = {r.skill_id for r in fresh_sample.store.index_rows() if r.instructions.strip()}
    fresh_sample.close()
    other = Catalog.open(Settings(data_dir=fresh_sample.data_dir, embed_instructions_chars=other_count), encoder=encoder)
    assert other.index().embed_count == other.store.count("active")
    assert f"embeds {built} characters" in caplog.text and "embedding every skill again" in caplog.text
    manifest = json.loads((fresh_sample.data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedded_text"] == {"instructions_chars": other_count}
    # Exactly the skills with instructions get other vectors: their embedded text is the one that changed.
    after = vectors_by_skill(other)
    assert after.keys() == before.keys() and with_instructions
    assert {s for s in after if not np.allclose(after[s], before[s], atol=1e-5)} == with_instructions
    assert other.search(OPERATOR, SearchRequest("git bisect")).hits
    other.close()
    again = Catalog.open(Settings(data_dir=fresh_sample.data_dir, embed_instructions_chars=other_count),
                         encoder=encoder)
    assert again.index().embed_count == 0
    again.close()


def test_an_index_opened_with_another_head_of_the_instructions_rebuilds_its_lexical_side_only(
        fresh_sample: Catalog, encoder: Encoder) -> None:
    """``lexical_instructions_chars`` decides what the lexical side holds: a change rebuilds it (the
    manifest says with which head) and keeps every vector."""
    built, head = fresh_sample.settings.lexical_instructions_chars, 300
    lexical = fresh_sample.index().lexical
    rows = list(fresh_sample.store.index_rows())
    assert all(len(r.instructions) <= built for r in rows)  # the sample's instructions are whole heads

    def head_terms(r: IndexRow) -> set[str]:
        card = " ".join((r.name, r.slug.replace("-", " "), " ".join(r.tags), r.description))
        return lexical.terms(f"{card} {split_instructions(r.instructions, head)[0]}")

    # A word of one skill's instructions past the shorter head that other skills' heads hold (so the rest of
    # the instructions is not searched for it): found with the whole instructions, not once the head is cut.
    heads = {r.skill_id: head_terms(r) for r in rows}
    word, skill_id = next(
        (w, r.skill_id) for r in rows for w in split_instructions(r.instructions, head)[1].split()
        if w.isalpha() and len(terms := lexical.terms(w)) == 1 and not terms & heads[r.skill_id]
        and any(terms & t for s, t in heads.items() if s != r.skill_id))

    def found(catalog: Catalog) -> set[str]:
        return {h.skill.skill_id for h in catalog.search(OPERATOR, SearchRequest(word, mode="lexical", limit=50)).hits}

    assert skill_id in found(fresh_sample)
    fresh_sample.close()
    other = Catalog.open(Settings(data_dir=fresh_sample.data_dir, lexical_instructions_chars=head), encoder=encoder)
    assert other.index().embed_count == 0
    manifest = json.loads((fresh_sample.data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["lexical"]["instructions_head_chars"] == head
    assert skill_id not in found(other) and found(other)
    other.close()


def test_a_corrupt_index_is_a_clear_error_and_the_catalog_is_untouched(fresh_sample: Catalog, encoder: Encoder
                                                                       ) -> None:
    count = fresh_sample.store.count()
    fresh_sample.close()
    (fresh_sample.data_dir / "vectors" / "vectors.npy").write_bytes(b"not numpy at all")
    broken = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    with pytest.raises(IndexNotReadyError, match="vector store .* unreadable .*skillsearch reindex"):
        broken.index()
    assert broken.store.count() == count
    broken.reindex()
    assert broken.search(OPERATOR, SearchRequest("git bisect")).hits


@pytest.mark.parametrize("garbled", ["{oops", "[1]", "5"])  # not JSON; JSON, but not an object
def test_a_garbled_manifest_names_the_file_and_the_fix(fresh_sample: Catalog, encoder: Encoder, garbled: str) -> None:
    fresh_sample.close()
    (fresh_sample.data_dir / "manifest.json").write_text(garbled, encoding="utf-8")
    with pytest.raises(IndexNotReadyError, match="manifest.json is unreadable.*reindex"):
        Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=encoder).index()


def test_a_stale_index_is_repaired_on_open(fresh_sample: Catalog, encoder: Encoder, tmp_path: Path) -> None:
    """A crash between the store commit and the index update leaves the manifest behind the store."""
    victim = fresh_sample.store.skills_by_slug("regex-debugging")[0]
    fresh_sample.close()
    # Another process (no index) archives a skill: the store moves on, the index does not.
    other = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    other.store.archive(victim.skill_id)
    manifest = json.loads((fresh_sample.data_dir / "manifest.json").read_text())
    assert manifest["store_generation"] < other.store.generation()
    reopened = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    assert reopened.index().embed_count == 0
    hits = reopened.search(OPERATOR, SearchRequest("debug a regular expression", mode="lexical", limit=50)).hits
    assert victim.skill_id not in {h.skill.skill_id for h in hits}
    assert len(reopened.index().snapshot().vectors) == reopened.store.count("active")


def test_only_changed_skills_are_re_embedded(fresh_sample: Catalog, tmp_path: Path) -> None:
    idx = fresh_sample.index()
    before = idx.embed_count
    bundle = tmp_path / "one.json"
    bundle.write_text(json.dumps([{"slug": "brand-new", "name": "Brand new", "description": "Feed the llamas."}]))
    report = fresh_sample.import_path(bundle, "extra", "user:me")
    assert report.index is not None and report.index.embedded == 1
    assert idx.embed_count == before + 1
    again = fresh_sample.import_path(bundle, "extra", "user:me")
    assert again.unchanged and idx.embed_count == before + 1
    hits = fresh_sample.search(OPERATOR, SearchRequest("llamas", mode="lexical")).hits
    assert [h.skill.slug for h in hits] == ["brand-new"]


def test_an_import_in_a_new_process_refreshes_only_what_it_changed(
    fresh_sample: Catalog, encoder: Encoder, tmp_path: Path
) -> None:
    """`skillsearch import` builds a Catalog without opening the index. Opened only after the store had
    moved, the index was behind and was repaired whole: every lexical document written again (15 s for one
    skill at 100k skills). It is opened first now, and the import is one refresh of one skill."""
    def segments() -> set[str]:
        meta = json.loads((fresh_sample.data_dir / "lexical" / "meta.json").read_text(encoding="utf-8"))
        return {s["segment_id"] for s in meta["segments"]}

    fresh_sample.close()
    before = segments()
    cli_like = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    bundle = tmp_path / "one.json"
    bundle.write_text(json.dumps([{"slug": "llama-care", "name": "Llama care", "description": "Feed the llamas."}]))
    report = cli_like.import_path(bundle, "extra", "user:me")
    assert report.index is not None and (report.index.upserted, report.index.embedded) == (1, 1)
    assert before <= segments()  # the sample's segments were kept, not rewritten
    assert llamas(cli_like)[0][0] == "llama-care"
    cli_like.close()


def test_a_small_update_appends_to_the_change_log_and_survives_a_reopen(
    fresh_sample: Catalog, encoder: Encoder, tmp_path: Path
) -> None:
    folder = fresh_sample.data_dir / "vectors"
    base = (folder / "vectors.npy").read_bytes()
    log = folder / "changes.log"  # none yet when the sample was built in one go (seeded in one transaction)
    logged = log.read_text(encoding="utf-8").count("\n") if log.exists() else 0
    bundle = tmp_path / "one.json"
    bundle.write_text(json.dumps([{"slug": "llama-care", "name": "Llama care", "description": "Feed the llamas."}]))
    fresh_sample.import_path(bundle, "extra", "user:me")
    assert (folder / "vectors.npy").read_bytes() == base  # the 45-row matrix was not rewritten
    assert log.read_text(encoding="utf-8").count("\n") == logged + 1
    before = [*answers(fresh_sample), llamas(fresh_sample)]
    assert before[-1][0][0] == "llama-care"
    fresh_sample.close()
    reopened = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    assert reopened.index().embed_count == 0
    assert [*answers(reopened), llamas(reopened)] == before


def test_a_batch_cut_short_in_the_change_log_is_repaired_from_the_store(fresh_sample: Catalog, encoder: Encoder
                                                                        ) -> None:
    """A crash while appending leaves half a line and a manifest behind the store: nothing is lost."""
    victim = fresh_sample.store.skills_by_slug("regex-debugging")[0]
    fresh_sample.close()
    other = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    other.store.archive(victim.skill_id)
    with open(fresh_sample.data_dir / "vectors" / "changes.log", "a", encoding="utf-8") as f:
        f.write('{"upserts": [["half a ba')
    reopened = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    vectors = reopened.index().snapshot().vectors
    assert victim.skill_id not in {r.skill_id for r in vectors.rows}
    assert len(vectors) == reopened.store.count("active")
    assert victim.skill_id not in {h.skill.skill_id for h in reopened.search(OPERATOR, SearchRequest("regex")).hits}


def test_a_skill_removed_from_a_mapped_index_is_gone_at_once_and_after_a_reopen(
    fresh_sample: Catalog, encoder: Encoder, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An index whose matrix is a file mapping (from ``MAPPED_FROM`` rows, lowered here with the int8 copy's
    threshold) removes a skill through the writer's path: the kept rows copied into the next matrix file,
    which the save names. The skill is gone from the answers at once, every other vector is what it was,
    no temporary file is left, and a reopened index answers the same."""
    monkeypatch.setattr(vector_saves, "MAPPED_FROM", 10)
    for module in (vectors_module, vector_updates, vector_saves):
        monkeypatch.setattr(module, "COMPACT_FROM", 10)
    fresh_sample.close()
    catalog = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    folder = catalog.data_dir / "vectors"
    catalog.index().refresh(catalog.store)  # every skill diffed, nothing changed: the whole store saved, then mapped
    assert catalog.index().snapshot().vectors.base is not None
    victim = catalog.store.skills_by_slug("regex-debugging")[0].skill_id
    others = {k: v for k, v in vectors_by_skill(catalog).items() if k != victim}
    catalog.store.archive(victim)
    catalog.index().refresh(catalog.store, [victim])
    vectors = catalog.index().snapshot().vectors
    assert vectors.base is not None and not vectors.base.pending and not (folder / "vectors.npy.tmp").exists()
    assert vectors.row_of(victim) is None and not (folder / "changes.log").exists()
    now = vectors_by_skill(catalog)
    assert now.keys() == others.keys() and all(np.array_equal(now[k], v) for k, v in others.items())
    assert victim not in {h.skill.skill_id for q in ("regex", "debug a regular expression")
                          for h in catalog.search(OPERATOR, SearchRequest(q)).hits}
    after = answers(catalog)
    catalog.close()
    reopened = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    assert reopened.index().embed_count == 0 and answers(reopened) == after
    reopened.close()


def test_files_a_dead_writer_left_under_temporary_names_are_removed_when_the_index_opens(
    fresh_sample: Catalog, encoder: Encoder,
) -> None:
    """A writer killed between a removal's apply and its save leaves the next matrix under its temporary name
    (1.5 GB at 1M rows), and one killed in a save leaves the others: the next open, holding the write lock,
    removes them, and the index answers as before."""
    before = answers(fresh_sample)
    fresh_sample.close()
    folder = fresh_sample.data_dir / "vectors"
    for name in ("vectors.npy.tmp", "codes.npy.tmp", "rows.npz.tmp"):
        (folder / name).write_bytes(b"half a file")
    kept = sorted(p.name for p in folder.iterdir() if not p.name.endswith(".tmp"))
    reopened = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=encoder)
    assert sorted(p.name for p in folder.iterdir()) == kept
    assert answers(reopened) == before
    reopened.close()


def test_a_garbled_change_log_line_is_a_clear_error(fresh_sample: Catalog, encoder: Encoder) -> None:
    fresh_sample.close()
    (fresh_sample.data_dir / "vectors" / "changes.log").write_text("not json\n", encoding="utf-8")
    with pytest.raises(IndexNotReadyError, match="vector store .* unreadable .*skillsearch reindex"):
        Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=encoder).index()


def test_the_change_log_is_folded_into_a_new_base_when_it_grows(tmp_path: Path) -> None:
    dim = 8
    rng = np.random.default_rng(3)

    def row(i: int) -> VectorRow:
        return VectorRow(f"sk_{i}", "team:a", "knowledge", (f"t{i % 3}",), f"d{i}", f"e{i}")

    snapshot = VectorSnapshot.build(dim, rng.random((4, dim), dtype=np.float32), [row(i) for i in range(4)])
    vector_saves.save(snapshot, tmp_path)
    expected = {f"sk_{i}" for i in range(4)}
    for i in range(4, 40):
        expected = (expected - ({f"sk_{i - 3}"} if i % 5 == 0 else set())) | {f"sk_{i}"}
        expected |= {f"sk_{i - 4}"} if i % 3 == 0 else set()
        batch = [(row(i), rng.random(dim, dtype=np.float32))]
        batch += [(row(i - 4), rng.random(dim, dtype=np.float32))] if i % 3 == 0 else []
        snapshot = snapshot.apply(batch, [f"sk_{i - 3}"] if i % 5 == 0 else [])
        vector_saves.save_changes(snapshot, tmp_path, batch, [f"sk_{i - 3}"] if i % 5 == 0 else [], max_log_bytes=2_000)
        loaded = vector_saves.load(tmp_path)
        assert loaded.rows == snapshot.rows
        np.testing.assert_array_equal(loaded.matrix, snapshot.matrix)
        assert loaded.key_to_row == snapshot.key_to_row and loaded.tag_rows.keys() == snapshot.tag_rows.keys()
    assert {r.skill_id for r in snapshot.rows} == expected and len(expected) < 40
    log = tmp_path / "changes.log"
    assert not log.exists() or log.stat().st_size <= 2_000 + 1_000


@pytest.mark.parametrize("n_queries", [1, 2, 5])
def test_max_cosines_is_each_rows_best_product_for_whole_matrices_and_column_views(n_queries: int) -> None:
    rng = np.random.default_rng(n_queries)
    wide = rng.standard_normal((700, 16)).astype(np.float32)
    wide.setflags(write=False)  # snapshots hold read-only matrices
    queries = rng.standard_normal((n_queries, 8)).astype(np.float32)
    whole = np.ascontiguousarray(wide[:, :8])
    whole.setflags(write=False)
    for matrix in (whole, wide[:, 8:]):  # torch's product, then numpy's for a strided route
        best = max_cosines(matrix, queries)
        assert best.dtype == np.float32 and best.flags.writeable
        np.testing.assert_allclose(best, (matrix.astype(np.float64) @ queries.T).max(axis=1), rtol=1e-5, atol=1e-5)
    assert max_cosines(np.zeros((0, 8), np.float32), queries).shape == (0,)


def test_zero_tiny_clears_values_whose_products_are_subnormal_without_writing_the_callers_array() -> None:
    rng = np.random.default_rng(3)
    m = rng.standard_normal((9_000, 8)).astype(np.float32)  # more rows than one scan block
    m[:, 5] = 1e-33
    m[8_500, 2] = -3e-30
    m[10, 0] = 0.0
    m.setflags(write=False)
    out = zero_tiny(m)
    assert out is not m and out.dtype == np.float32 and out.shape == m.shape
    assert (out[:, 5] == 0).all() and out[8_500, 2] == 0 and (m[:, 5] == np.float32(1e-33)).all()
    untouched = np.abs(m) >= TINY
    np.testing.assert_array_equal(out[untouched], m[untouched])
    assert zero_tiny(out) is out  # nothing left to clear: no copy
    assert (zero_tiny(np.float32([1e-25, 0.5])) == np.float32([0, 0.5])).all()  # one vector


def test_the_models_dead_dimensions_are_zero_in_every_snapshot_and_the_cosines_do_not_move(
        encoder: Encoder, tmp_path: Path) -> None:
    raw = encoder.encode_documents(["review a pull request", "plan a database migration"])
    tiny = (np.abs(raw) < TINY) & (raw != 0)
    assert tiny.any()  # MiniLM gives every text components of about 1e-33: the reason for zero_tiny
    rows = [VectorRow(f"s{i}", "g", "knowledge", (), "d", "e") for i in range(2)]
    snapshot = VectorSnapshot.build(encoder.dim, raw, rows)
    assert not ((np.abs(snapshot.matrix) < TINY) & (snapshot.matrix != 0)).any()
    query = encoder.encode_query_parts("review code", ["and a pull request"])
    np.testing.assert_allclose(max_cosines(snapshot.matrix, query), (raw @ query.T).max(axis=1), atol=1e-6)
    # A replaced row (the path that keeps the filters and skips build) is cleared as well, and so is a
    # snapshot read back from disk.
    replaced = snapshot.apply([(rows[0], raw[1])], [])
    assert not ((np.abs(replaced.matrix) < TINY) & (replaced.matrix != 0)).any()
    vector_saves.save(snapshot, tmp_path)
    np.save(tmp_path / "vectors.npy", raw)  # an index written before the rule
    loaded = vector_saves.load(tmp_path)
    assert not ((np.abs(loaded.matrix) < TINY) & (loaded.matrix != 0)).any()


def test_by_default_the_vector_embeds_name_and_description_and_the_lexical_side_keeps_the_instructions(
        fresh_sample: Catalog) -> None:
    """The default recipe (docs/benchmarks.md, "Embedded text"): the body stays out of the vector but is
    still searchable by its words."""
    row = next(r for r in fresh_sample.store.index_rows() if len(r.instructions.split()) > 20)
    text = embedded_text(row, fresh_sample.settings.embed_instructions_chars)
    assert text.endswith(row.description.strip()) and row.instructions.strip()[:40] not in text
    assert embedded_text(row, 600).startswith(text + "\n")
    # A word found only in the instructions still finds the skill lexically.
    words = {w for w in row.instructions.lower().split() if w.isalpha() and len(w) > 7}
    card = f"{row.name} {row.slug} {row.description} {' '.join(row.tags)}".lower()
    only_body = sorted(w for w in words if w not in card)
    assert only_body
    hits = fresh_sample.search(OPERATOR, SearchRequest(only_body[0], mode="lexical", limit=50)).hits
    assert row.skill_id in {h.skill.skill_id for h in hits}
