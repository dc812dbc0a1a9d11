/* The vector stage's int8 kernel (skillsearch/retrieval/int8_kernels.py calls it; docs/benchmarks.md,
 * "Our own int8 kernel" and "Our kernel on AVX-512 VNNI").
 *
 * dots(rows, queries, out, path=None): out[i, j] = sum_k rows[i, k] * queries[j, k], exact, for int8
 * rows (n, d) and int8 query vectors (q, d), all C-contiguous; out is a writable float32 (n, q) array (the
 * products are integers of at most 2^24 for d <= 1024, so exact in float32).
 * best(rows, queries, best, sum=None, at=None, path=None): each row's largest product (exact) and the sum
 * of its products (rounded to float32), into float32 (n,) arrays: the scan's usual need, without writing and
 * re-reading every product. With ``at`` (int64 row numbers, m of them) only those rows, read in place, into
 * (m,) arrays.
 * best_shifted(rows, queries, best, scales, factor, groups, by, whole_by=None, inv_norm=0.0, path=None): best()
 * under a language shift (the e5 route's centering), each product scaled and shifted per row's language
 * group before the best is taken, for up to 8 query vectors: the scan's need there, without a block of
 * products for numpy to scale, shift and reduce. Built without fused multiply-adds (``-ffp-contract=off``),
 * so each step rounds as numpy's does.
 * best4(tiles, queries, best, sum=None, scales=None, factor=1.0, inv_norm=0.0, path=None), to_int4(codes, out)
 * and tile_shape(n, w): the same best and sum over int4 rows in tiles of sixteen (or, with ``scales``, each
 * row's score finished as the scan finishes it), the int4 tiles made from int8 codes, and their shape.
 * The GIL is released while any of them runs, so Python threads can share a scan, each over its own rows.
 *
 * Why our own: the maintained kernels (numkong's cdist and packed kernel) read a row once per query vector,
 * or write every product for the caller to read again for each row's best and sum. This one reads each row
 * once and multiplies it against every query vector (up to 8 at a time) from registers, keeping only what the
 * scan needs:
 * - AVX-512 VNNI: 64 columns a step with vpdpbusd, which multiplies unsigned by signed bytes, so the row's
 *   bytes are taken as r + 128 (their sign bit flipped) and 128 * sum(q) is subtracted once per product;
 * - AVX2: each 16 int8 of a row widened to int16 once, against the query vectors' int16 copies (in L1), with
 *   vpmaddwd;
 * - a portable loop elsewhere. Every path gives the same numbers.
 *
 * Dispatch at run time: the widest path the core (and the operating system's saved register state) has,
 * by __builtin_cpu_supports; ``path`` names one for tests and benchmarks. kernel() names the default,
 * paths() every one this core runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_X86 1
#include <immintrin.h>
#else
#define HAVE_X86 0
#endif

/* Query vectors scored against a row from registers at once; more are done in groups of this many. */
#define GROUP 8
/* Instantiates M once for each count of query vectors a group holds, 1 to GROUP (each count a constant in its
 * function, so the accumulators stay in registers). */
#define FOR_EACH_COUNT(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8)
/* The same, each with ``A`` as its first argument. */
#define FOR_EACH_COUNT_OF(M, A) M(A, 1) M(A, 2) M(A, 3) M(A, 4) M(A, 5) M(A, 6) M(A, 7) M(A, 8)
/* Above this many columns an int32 sum could overflow and a float32 product lose exactness. */
#define MAX_DIM 1024

/* A language shift (best_shifted()): query vector j scores row i as ``p * factor * scales[i] - by[j * n_groups +
 * groups[i]]`` (p the exact product; each step rounded to float32 as numpy takes them), and with
 * ``whole_by`` the sum of the row's products over the norm, ``sum * inv_norm * factor * scales[i] -
 * whole_by[groups[i]]``, competes too (the request's first vector, derived from its sentences). */
typedef struct {
    const float *scales, *by, *whole_by;
    const int64_t *groups;
    Py_ssize_t n_groups;
    float factor, inv_norm;
} shift_t;

/* A row's best finished as the scan scores it (best4() with ``scales``): ``b * factor * scales[i]``, b the
 * best product or, with ``inv_norm``, the sum of the products times ``inv_norm`` where that is larger (the
 * request's first vector derived from its sentences), each step rounded to float32 as numpy takes them. */
typedef struct {
    const float *scales;
    float factor, inv_norm;
} finish_t;

/* Where a row's products with a group of query vectors go: every product (``out``, row stride ``stride``,
 * from column ``col``), or only their largest and their sum (``best``, ``sum``; sum may be NULL), combined
 * with what the earlier groups left there unless ``first``. ``at``: the int8 rows read, output i from row
 * at[i] (best() with ``at``: a few thousand rows picked from a large matrix, read in place), or NULL for
 * every row in order. */
typedef struct {
    float *out;
    Py_ssize_t stride, col;
    float *best, *sum;
    int first;
    const int64_t *at;
    const shift_t *shift;
    const finish_t *finish;  /* one group only (best4() holds it to GROUP vectors) */
} sink_t;

/* Output i's int8 row of ``d`` columns (:c:type:`sink_t`'s ``at``). */
static inline const int8_t *row_of(const int8_t *rows, Py_ssize_t d, const sink_t *sink, Py_ssize_t i)
{
    return rows + (sink->at != NULL ? sink->at[i] : i) * d;
}

static inline void emit(const sink_t *sink, Py_ssize_t i, const int32_t *products, int count)
{
    if (sink->out != NULL) {
        for (int j = 0; j < count; j++)
            sink->out[i * sink->stride + sink->col + j] = (float)products[j];
        return;
    }
    if (sink->shift != NULL) {  /* one group only (best_shifted() holds it to GROUP vectors) */
        const shift_t *sh = sink->shift;
        const float scale = sh->scales[i];
        const Py_ssize_t g = sh->groups[i];
        float best = (float)products[0] * sh->factor * scale - sh->by[g];
        int64_t total = products[0];
        for (int j = 1; j < count; j++) {
            const float v = (float)products[j] * sh->factor * scale - sh->by[j * sh->n_groups + g];
            best = v > best ? v : best;
            total += products[j];
        }
        if (sh->whole_by != NULL) {
            const float whole = (float)total * sh->inv_norm * sh->factor * scale - sh->whole_by[g];
            best = whole > best ? whole : best;
        }
        sink->best[i] = best;
        return;
    }
    int32_t most = products[0];
    int64_t total = products[0];
    for (int j = 1; j < count; j++) {
        most = products[j] > most ? products[j] : most;
        total += products[j];
    }
    if (sink->finish != NULL) {
        const finish_t *f = sink->finish;
        float best = (float)most;
        if (f->inv_norm != 0.0f) {
            const float whole = (float)total * f->inv_norm;
            best = whole > best ? whole : best;
        }
        best = best * f->factor;
        sink->best[i] = best * f->scales[i];
    }
    else if (sink->first || (float)most > sink->best[i])
        sink->best[i] = (float)most;
    if (sink->sum != NULL)
        sink->sum[i] = sink->first ? (float)total : sink->sum[i] + (float)total;
}

static void portable_group(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int8_t *queries, int count,
                           const sink_t *sink)
{
    int32_t products[GROUP];
    for (Py_ssize_t i = 0; i < n; i++) {
        const int8_t *r = row_of(rows, d, sink, i);
        for (int j = 0; j < count; j++) {
            const int8_t *q = queries + j * d;
            int32_t sum = 0;
            for (Py_ssize_t k = 0; k < d; k++)
                sum += (int32_t)r[k] * (int32_t)q[k];
            products[j] = sum;
        }
        emit(sink, i, products, count);
    }
}

#if HAVE_X86
/* Rows picked by ``at`` are read out of order, where the hardware cannot guess the next: each is asked
 * for this many rows ahead of its turn. */
#define AHEAD 8
/* A scan in order asks for the bytes this far ahead of those it reads (int8 rows: sixteen of 384 bytes; int4
 * tiles: two of 3,072). The first scan of a search finds its copy out of the caches (the model's forward
 * pass has just read some 90 MB of weights), and the hardware's own prefetching left the kernel waiting on
 * memory: asked ahead, that scan took 2.5 ms instead of 3.8 (int8) and 1.4 instead of 1.9 (int4) at 100k rows
 * with two threads, and a scan of 1M rows a third less (docs/benchmarks.md, "Asking for the rows ahead"). */
#define SCAN_AHEAD 6144

/* Asks for ``bytes`` from ``p`` to be loaded into the cache, a line at a time. Always inlined, as are its
 * callers: left to GCC, they were not inlined into the kernels (whose target options differ) and neither a
 * call nor a prefetch was left in the kernels' code (a prefetch changes no value). */
__attribute__((always_inline)) static inline void prefetch_span(const void *p, Py_ssize_t bytes)
{
    for (Py_ssize_t b = 0; b < bytes; b += 64)
        _mm_prefetch((const char *)p + b, _MM_HINT_T0);
}

/* Asks for ``count`` rows (``d`` int8 each) named by ``at`` to be loaded into the cache. */
__attribute__((always_inline)) static inline void
prefetch_rows(const int8_t *rows, Py_ssize_t d, const int64_t *at, int count)
{
    for (int r = 0; r < count; r++)
        prefetch_span(rows + at[r] * d, d);
}

/* Rows i.. of ``n`` asked for SCAN_AHEAD bytes ahead when read in order (``at`` NULL), ``count`` of them
 * (``d`` bytes each; an int4 tile is TILE rows of its row bytes, in order); picked rows ``at`` AHEAD rows
 * ahead. */
__attribute__((always_inline)) static inline void
prefetch_ahead(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int64_t *at, Py_ssize_t i, int count)
{
    if (at != NULL) {
        if (i + AHEAD + count <= n)
            prefetch_rows(rows, d, at + i + AHEAD, count);
    }
    else if ((i + count) * d + SCAN_AHEAD <= n * d)
        prefetch_span(rows + i * d + SCAN_AHEAD, count * d);
}

/* Rows times ``count`` query vectors (int16 copies in ``wide``, d each; count a constant in each caller, so
 * the accumulators stay in registers). */
__attribute__((target("avx2"), always_inline)) static inline void
avx2_group(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int16_t *wide, const int8_t *queries,
           int count, const sink_t *sink)
{
    const Py_ssize_t body = d - d % 16;
    int32_t products[GROUP];
    for (Py_ssize_t i = 0; i < n; i++) {
        const int8_t *r = row_of(rows, d, sink, i);
        __m256i acc[GROUP];
        prefetch_ahead(rows, n, d, sink->at, i, 1);
        for (int j = 0; j < count; j++)
            acc[j] = _mm256_setzero_si256();
        for (Py_ssize_t k = 0; k < body; k += 16) {
            const __m256i a = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(r + k)));
            for (int j = 0; j < count; j++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(wide + j * d + k));
                acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(a, q));
            }
        }
        for (int j = 0; j < count; j++) {
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc[j]), _mm256_extracti128_si256(acc[j], 1));
            s = _mm_hadd_epi32(s, s);
            s = _mm_hadd_epi32(s, s);
            int32_t sum = _mm_cvtsi128_si32(s);
            for (Py_ssize_t k = body; k < d; k++)
                sum += (int32_t)r[k] * (int32_t)queries[j * d + k];
            products[j] = sum;
        }
        emit(sink, i, products, count);
    }
}

#define AVX2_GROUP(COUNT)                                                                                    \
    __attribute__((target("avx2"))) static void avx2_group##COUNT(                                          \
        const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int16_t *wide, const int8_t *queries,         \
        const sink_t *sink)                                                                                  \
    {                                                                                                        \
        avx2_group(rows, n, d, wide, queries, COUNT, sink);                                                 \
    }
FOR_EACH_COUNT(AVX2_GROUP)
#define AVX2_NAME(COUNT) avx2_group##COUNT,

typedef void (*group_fn)(const int8_t *, Py_ssize_t, Py_ssize_t, const int16_t *, const int8_t *,
                         const sink_t *);
static const group_fn GROUPS[GROUP] = {FOR_EACH_COUNT(AVX2_NAME)};

/* The sums of the 16 lanes of each of four accumulators, as the four lanes of one register: pairs of them
 * interleaved and added, then pairs of pairs, then the four 128-bit quarters added (13 instructions for four
 * sums, where one sum at a time takes 8). */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline __m128i
sum4(__m512i a0, __m512i a1, __m512i a2, __m512i a3)
{
    const __m512i b01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
    const __m512i b23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
    const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(b01, b23), _mm512_unpackhi_epi64(b01, b23));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The same with AVX-512 VNNI, 64 columns a step: the row's steps are loaded (and their sign bits flipped) once,
 * then each query vector's products taken over them; the last partial step under a mask (masked-off query
 * bytes are zero, so whatever the row's are there adds nothing). The accumulators are summed four at a time
 * (:c:func:`sum4`). ``offsets``: 128 * sum(q) of each query vector, padded with zeros to a multiple of 4. */
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) static inline void
vnni_group(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int8_t *queries, const int32_t *offsets,
           int count, const sink_t *sink)
{
    const Py_ssize_t steps = (d + 63) / 64;
    const __mmask64 last = d % 64 ? (((__mmask64)1) << (d % 64)) - 1 : ~(__mmask64)0;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const int padded = (count + 3) / 4 * 4;
    int32_t products[2][GROUP];
    Py_ssize_t i = 0;
    /* Two rows at a time: each query step loaded once feeds both rows' products. */
    for (; i + 2 <= n; i += 2) {
        const int8_t *r0 = row_of(rows, d, sink, i), *r1 = row_of(rows, d, sink, i + 1);
        prefetch_ahead(rows, n, d, sink->at, i, 2);
        __m512i acc0[GROUP], acc1[GROUP];
        for (int j = 0; j < padded; j++)
            acc0[j] = acc1[j] = _mm512_setzero_si512();
        for (Py_ssize_t k = 0; k < steps; k++) {
            const __mmask64 m = k + 1 < steps ? ~(__mmask64)0 : last;
            const __m512i a0 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r0 + 64 * k), flip);
            const __m512i a1 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r1 + 64 * k), flip);
            for (int j = 0; j < count; j++) {
                const __m512i q = _mm512_maskz_loadu_epi8(m, queries + j * d + 64 * k);
                acc0[j] = _mm512_dpbusd_epi32(acc0[j], a0, q);
                acc1[j] = _mm512_dpbusd_epi32(acc1[j], a1, q);
            }
        }
        for (int j = 0; j < padded; j += 4) {
            const __m128i off = _mm_loadu_si128((const __m128i *)(offsets + j));
            _mm_storeu_si128((__m128i *)(products[0] + j), _mm_sub_epi32(sum4(acc0[j], acc0[j + 1], acc0[j + 2], acc0[j + 3]), off));
            _mm_storeu_si128((__m128i *)(products[1] + j), _mm_sub_epi32(sum4(acc1[j], acc1[j + 1], acc1[j + 2], acc1[j + 3]), off));
        }
        emit(sink, i, products[0], count);
        emit(sink, i + 1, products[1], count);
    }
    for (; i < n; i++) {
        const int8_t *r = row_of(rows, d, sink, i);
        __m512i acc[GROUP];
        for (int j = 0; j < padded; j++)
            acc[j] = _mm512_setzero_si512();
        for (Py_ssize_t k = 0; k < steps; k++) {
            const __mmask64 m = k + 1 < steps ? ~(__mmask64)0 : last;
            const __m512i a = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r + 64 * k), flip);
            for (int j = 0; j < count; j++)
                acc[j] = _mm512_dpbusd_epi32(acc[j], a, _mm512_maskz_loadu_epi8(m, queries + j * d + 64 * k));
        }
        for (int j = 0; j < padded; j += 4)
            _mm_storeu_si128((__m128i *)(products[0] + j),
                             _mm_sub_epi32(sum4(acc[j], acc[j + 1], acc[j + 2], acc[j + 3]),
                                           _mm_loadu_si128((const __m128i *)(offsets + j))));
        emit(sink, i, products[0], count);
    }
}

/* An AVX-512 VNNI group function (``FN``: int8 rows, or int4 tiles) instantiated for one count of query
 * vectors (given as ``QT``: int8 codes, or the tiles' words), and its entry in a table by count. */
#define VNNI_FUNCTION(FN, COUNT, QT)                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vnni"))) static void FN##COUNT(                           \
        const void *rows, Py_ssize_t n, Py_ssize_t width, const QT *queries, const int32_t *offsets,        \
        const sink_t *sink)                                                                                  \
    {                                                                                                        \
        FN(rows, n, width, queries, offsets, COUNT, sink);                                                  \
    }
#define VNNI_INSTANCE(FN, COUNT) VNNI_FUNCTION(FN, COUNT, int8_t)
#define VNNI_ENTRY(FN, COUNT) FN##COUNT,
FOR_EACH_COUNT_OF(VNNI_INSTANCE, vnni_group)

typedef void (*vnni_fn)(const void *, Py_ssize_t, Py_ssize_t, const int8_t *, const int32_t *, const sink_t *);
static const vnni_fn VNNI_GROUPS[GROUP] = {FOR_EACH_COUNT_OF(VNNI_ENTRY, vnni_group)};
#endif

/* int4 rows (:c:func:`best4`) in tiles of TILE rows: a row of ``d = 2h`` columns is ``h`` bytes, byte k holding
 * column k in its low four bits and column h + k in its high four, each as its code + 8 (0..15; codes -7..7),
 * and a tile interleaves its rows four bytes at a time: word g of row r (bytes 4g..4g+3) lies at 64 g + 4 r
 * (``hp``, h rounded up to a multiple of 4, bytes a row; the padding bytes and the rows past the last are 0x88,
 * codes 0). One 64-byte load so holds four bytes (eight columns) of each of sixteen rows, and vpdpbusd against
 * the query's four bytes broadcast adds each row's products into its own lane: no sums across lanes, which cost
 * more than the products when a row's were summed one row at a time. A product with an int8 query vector q is
 * sum(low * q[:h]) + sum(high * q[h:]) - 8 * sum(q): ``offsets`` holds the last term of each vector. Half the
 * bytes of an int8 row, so half the memory a scan reads. */
#define TILE 16

/* Row i's byte k in the tiles of rows of ``hp`` bytes. */
static inline Py_ssize_t tile_at(Py_ssize_t i, Py_ssize_t k, Py_ssize_t hp)
{
    return (i / TILE) * TILE * hp + (k / 4) * 64 + (i % TILE) * 4 + k % 4;
}

/* ``queries`` (count, 2h) as the words the tiles are multiplied by: vector j's low half in words[j][0][g]
 * and its high half in words[j][1][g], four query bytes a word, zero past h. */
static void query_words(const int8_t *queries, int count, Py_ssize_t h, Py_ssize_t hp, int32_t *words)
{
    const Py_ssize_t groups = hp / 4;
    for (int j = 0; j < count; j++)
        for (int half = 0; half < 2; half++) {
            int8_t bytes[MAX_DIM / 2] = {0};
            memcpy(bytes, queries + j * 2 * h + half * h, (size_t)h);
            memcpy(words + (2 * j + half) * groups, bytes, (size_t)hp);
        }
}

static void portable4_group(const uint8_t *tiles, Py_ssize_t n, Py_ssize_t h, Py_ssize_t hp, const int8_t *queries,
                            int count, const int32_t *offsets, const sink_t *sink)
{
    int32_t products[GROUP];
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int j = 0; j < count; j++) {
            const int8_t *q = queries + j * 2 * h;
            int32_t sum = 0;
            for (Py_ssize_t k = 0; k < h; k++) {
                const uint8_t b = tiles[tile_at(i, k, hp)];
                sum += (int32_t)(b & 15) * q[k] + (int32_t)(b >> 4) * q[h + k];
            }
            products[j] = sum - offsets[j];
        }
        emit(sink, i, products, count);
    }
}

#if HAVE_X86
/* AVX2: half a tile (eight rows) a step, the nibbles times the query's four bytes broadcast with vpmaddubsw (at
 * most 2 * 15 * 128 in magnitude, two of them added: no saturation), widened to int32 with vpmaddwd. */
__attribute__((target("avx2"))) static void avx2_nibbles(const uint8_t *tiles, Py_ssize_t n, Py_ssize_t hp,
                                                        const int32_t *words, int count, const int32_t *offsets,
                                                        const sink_t *sink)
{
    const Py_ssize_t groups = hp / 4;
    const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    int32_t products[GROUP][8];
    for (Py_ssize_t i = 0; i < n; i += 8) {
        const uint8_t *t = tiles + (i / TILE) * TILE * hp + (i % TILE) * 4;
        if (i % TILE == 0)  /* a tile of TILE rows of hp bytes: asked for as TILE rows in order */
            prefetch_ahead((const int8_t *)tiles, n, hp, NULL, i, TILE);
        __m256i acc[GROUP];
        for (int j = 0; j < count; j++)
            acc[j] = _mm256_setzero_si256();
        for (Py_ssize_t g = 0; g < groups; g++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(t + 64 * g));
            const __m256i lo = _mm256_and_si256(x, low), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low);
            for (int j = 0; j < count; j++) {
                const __m256i a = _mm256_maddubs_epi16(lo, _mm256_set1_epi32(words[2 * j * groups + g]));
                const __m256i b = _mm256_maddubs_epi16(hi, _mm256_set1_epi32(words[(2 * j + 1) * groups + g]));
                acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_add_epi16(a, b), ones));
            }
        }
        for (int j = 0; j < count; j++)
            _mm256_storeu_si256((__m256i *)products[j], _mm256_sub_epi32(acc[j], _mm256_set1_epi32(offsets[j])));
        int32_t row[GROUP];
        for (Py_ssize_t r = 0; r < 8 && i + r < n; r++) {
            for (int j = 0; j < count; j++)
                row[j] = products[j][r];
            emit(sink, i + r, row, count);
        }
    }
}

/* Sixteen rows' best product and sum of products (``p``, one register a query vector) into ``sink`` from
 * row i, ``rows`` of them: what :c:func:`emit` does a row at a time, as the same float32 numbers. */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline void
emit16(const sink_t *sink, Py_ssize_t i, Py_ssize_t rows, const __m512i *p, int count)
{
    const __mmask16 m = rows >= TILE ? (__mmask16)0xFFFF : (__mmask16)((1u << rows) - 1);
    __m512i most = p[0], total = p[0];
    for (int j = 1; j < count; j++) {
        most = _mm512_max_epi32(most, p[j]);
        total = _mm512_add_epi32(total, p[j]);
    }
    __m512 best = _mm512_cvtepi32_ps(most);
    if (sink->finish != NULL) {
        const finish_t *f = sink->finish;
        if (f->inv_norm != 0.0f)
            best = _mm512_max_ps(best, _mm512_mul_ps(_mm512_cvtepi32_ps(total), _mm512_set1_ps(f->inv_norm)));
        best = _mm512_mul_ps(_mm512_mul_ps(best, _mm512_set1_ps(f->factor)), _mm512_maskz_loadu_ps(m, f->scales + i));
    }
    else if (!sink->first)
        best = _mm512_max_ps(best, _mm512_maskz_loadu_ps(m, sink->best + i));
    _mm512_mask_storeu_ps(sink->best + i, m, best);
    if (sink->sum != NULL) {
        __m512 sum = _mm512_cvtepi32_ps(total);
        if (!sink->first)
            sum = _mm512_add_ps(_mm512_maskz_loadu_ps(m, sink->sum + i), sum);
        _mm512_mask_storeu_ps(sink->sum + i, m, sum);
    }
}

/* AVX-512 VNNI: a tile a step, each of its 64-byte loads (four bytes of each of sixteen rows) split into its low
 * and high nibbles and multiplied (vpdpbusd) against each query vector's four bytes broadcast, one accumulator
 * per vector and half. One or two vectors take two loads at a time into two sets of accumulators, so that four
 * chains of dependent vpdpbusd run side by side, not two. */
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) static inline void
vnni4_group(const void *tiles_, Py_ssize_t n, Py_ssize_t hp, const int32_t *words, const int32_t *offsets,
            int count, const sink_t *sink)
{
    const uint8_t *tiles = tiles_;
    const Py_ssize_t groups = hp / 4;
    const __m512i low = _mm512_set1_epi8(0x0F);
    const int pairs = count <= 2;
    for (Py_ssize_t i = 0; i < n; i += TILE) {
        const uint8_t *t = tiles + i * hp;
        prefetch_ahead((const int8_t *)tiles, n, hp, NULL, i, TILE);
        __m512i acc[2][2][GROUP];
        for (int s = 0; s < 2; s++)
            for (int j = 0; j < count; j++)
                acc[s][0][j] = acc[s][1][j] = _mm512_setzero_si512();
        Py_ssize_t g = 0;
        if (pairs)
            for (; g + 2 <= groups; g += 2)
                for (int s = 0; s < 2; s++) {
                    const __m512i x = _mm512_loadu_si512(t + 64 * (g + s));
                    const __m512i lo = _mm512_and_si512(x, low), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
                    for (int j = 0; j < count; j++) {
                        const int32_t *w = words + 2 * j * groups + g + s;  /* the vector's low half, then its high */
                        acc[s][0][j] = _mm512_dpbusd_epi32(acc[s][0][j], lo, _mm512_set1_epi32(w[0]));
                        acc[s][1][j] = _mm512_dpbusd_epi32(acc[s][1][j], hi, _mm512_set1_epi32(w[groups]));
                    }
                }
        for (; g < groups; g++) {
            const __m512i x = _mm512_loadu_si512(t + 64 * g);
            const __m512i lo = _mm512_and_si512(x, low), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
            for (int j = 0; j < count; j++) {
                const int32_t *w = words + 2 * j * groups + g;
                acc[0][0][j] = _mm512_dpbusd_epi32(acc[0][0][j], lo, _mm512_set1_epi32(w[0]));
                acc[0][1][j] = _mm512_dpbusd_epi32(acc[0][1][j], hi, _mm512_set1_epi32(w[groups]));
            }
        }
        __m512i p[GROUP];
        for (int j = 0; j < count; j++) {
            p[j] = _mm512_sub_epi32(_mm512_add_epi32(acc[0][0][j], acc[0][1][j]), _mm512_set1_epi32(offsets[j]));
            if (pairs)
                p[j] = _mm512_add_epi32(p[j], _mm512_add_epi32(acc[1][0][j], acc[1][1][j]));
        }
        emit16(sink, i, n - i, p, count);
    }
}

typedef void (*vnni4_fn)(const void *, Py_ssize_t, Py_ssize_t, const int32_t *, const int32_t *, const sink_t *);
#define VNNI4_INSTANCE(FN, COUNT) VNNI_FUNCTION(FN, COUNT, int32_t)
FOR_EACH_COUNT_OF(VNNI4_INSTANCE, vnni4_group)
static const vnni4_fn VNNI4_GROUPS[GROUP] = {FOR_EACH_COUNT_OF(VNNI_ENTRY, vnni4_group)};
#endif

/* The kernel's paths, widest first: the default is the first this core runs. */
enum path { PATH_VNNI, PATH_AVX2, PATH_PORTABLE, PATHS };
static const char *const PATH_NAMES[PATHS] = {"avx512vnni", "avx2", "portable"};

static int runs(enum path path)
{
#if HAVE_X86
    if (path == PATH_VNNI)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
    if (path == PATH_AVX2)
        return __builtin_cpu_supports("avx2");
#endif
    return path == PATH_PORTABLE;
}

static enum path default_path(void)
{
    enum path p = PATH_VNNI;
    while (!runs(p))
        p++;
    return p;
}

/* Every group of query vectors over all the rows on ``path``; ``wide`` (room for GROUP * d int16) for AVX2. */
static void run(const int8_t *rows, Py_ssize_t n, Py_ssize_t d, const int8_t *queries, Py_ssize_t nq,
                sink_t sink, enum path path, int16_t *wide)
{
    for (Py_ssize_t first = 0; first < nq; first += GROUP) {
        const int count = (int)(nq - first < GROUP ? nq - first : GROUP);
        const int8_t *q = queries + first * d;
        sink.col = first;
        sink.first = first == 0;
#if HAVE_X86
        if (path == PATH_VNNI) {
            int32_t offsets[GROUP] = {0};
            for (int j = 0; j < count; j++) {
                int32_t total = 0;
                for (Py_ssize_t k = 0; k < d; k++)
                    total += q[j * d + k];
                offsets[j] = 128 * total;
            }
            VNNI_GROUPS[count - 1](rows, n, d, q, offsets, &sink);
            continue;
        }
        if (path == PATH_AVX2) {
            for (Py_ssize_t t = 0; t < count * d; t++)
                wide[t] = q[t];
            GROUPS[count - 1](rows, n, d, wide, q, &sink);
            continue;
        }
#endif
        portable_group(rows, n, d, q, count, &sink);
    }
}

/* :c:func:`run` for int4 rows of ``h`` bytes (``2h`` columns) in tiles of rows of ``hp`` bytes. */
static void run4(const uint8_t *tiles, Py_ssize_t n, Py_ssize_t h, Py_ssize_t hp, const int8_t *queries,
                 Py_ssize_t nq, sink_t sink, enum path path)
{
    for (Py_ssize_t first = 0; first < nq; first += GROUP) {
        const int count = (int)(nq - first < GROUP ? nq - first : GROUP);
        const int8_t *q = queries + first * 2 * h;
        int32_t offsets[GROUP] = {0};
        for (int j = 0; j < count; j++) {
            int32_t total = 0;
            for (Py_ssize_t k = 0; k < 2 * h; k++)
                total += q[j * 2 * h + k];
            offsets[j] = 8 * total;
        }
        sink.col = first;
        sink.first = first == 0;
#if HAVE_X86
        if (path == PATH_VNNI || path == PATH_AVX2) {
            int32_t words[GROUP * 2 * (MAX_DIM / 8)];
            query_words(q, count, h, hp, words);
            if (path == PATH_VNNI)
                VNNI4_GROUPS[count - 1](tiles, n, hp, words, offsets, &sink);
            else
                avx2_nibbles(tiles, n, hp, words, count, offsets, &sink);
            continue;
        }
#endif
        portable4_group(tiles, n, h, hp, q, count, offsets, &sink);
    }
}

/* ``name`` (a str, or None for this core's default) as a path this core runs; -1 with ValueError otherwise. */
static int path_of(PyObject *name, enum path *out)
{
    if (name == Py_None) {
        *out = default_path();
        return 0;
    }
    for (int p = 0; p < PATHS; p++) {
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, PATH_NAMES[p]) == 0) {
            if (!runs((enum path)p)) {
                PyErr_Format(PyExc_ValueError, "this core cannot run the %s path", PATH_NAMES[p]);
                return -1;
            }
            *out = (enum path)p;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown path %R: one of 'avx512vnni', 'avx2', 'portable'", name);
    return -1;
}

/* A C-contiguous buffer of ``ndim`` dimensions and the given struct format ("b": int8, "f": float32). */
static int get_array(PyObject *obj, Py_buffer *view, const char *format, int ndim, int writable, const char *name)
{
    const char *type = format[0] == 'b' ? "int8" : format[0] == 'B' ? "uint8" : "float32";
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s array of %s", name, writable ? " writable" : "",
                     type);
        return -1;
    }
    const char *f = view->format;
    if (f[0] == '@' || f[0] == '=' || f[0] == '<')
        f++;
    if (view->ndim != ndim || strcmp(f, format) != 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a %d-d array of %s (got %d-d, format '%s')", name, ndim, type,
                     view->ndim, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The rows and query vectors every call takes, checked; both released on failure. */
static int get_inputs(PyObject *rows_obj, PyObject *queries_obj, Py_buffer *rows, Py_buffer *queries)
{
    if (get_array(rows_obj, rows, "b", 2, 0, "rows") < 0)
        return -1;
    if (get_array(queries_obj, queries, "b", 2, 0, "queries") < 0) {
        PyBuffer_Release(rows);
        return -1;
    }
    const Py_ssize_t d = rows->shape[1];
    if (queries->shape[1] != d)
        PyErr_Format(PyExc_ValueError, "rows have %zd columns, queries %zd", d, queries->shape[1]);
    else if (d > MAX_DIM)
        PyErr_Format(PyExc_ValueError, "at most %d columns (got %zd): the products would lose exactness", MAX_DIM, d);
    else
        return 0;
    PyBuffer_Release(rows);
    PyBuffer_Release(queries);
    return -1;
}

/* Runs the kernel on ``path`` without the GIL, for ``n`` outputs (every row, or the ``at`` rows). */
static int run_released(Py_buffer *rows, Py_ssize_t n, Py_buffer *queries, sink_t sink, enum path path)
{
    const Py_ssize_t d = rows->shape[1];
    int16_t *wide = NULL;
    if (path == PATH_AVX2 && (wide = PyMem_RawMalloc(sizeof(int16_t) * GROUP * (d ? d : 1))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    const int8_t *r = rows->buf, *q = queries->buf;
    Py_BEGIN_ALLOW_THREADS
    run(r, n, d, q, queries->shape[0], sink, path, wide);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(wide);
    return 0;
}

static PyObject *dots(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rows", "queries", "out", "path", NULL};
    PyObject *rows_obj, *queries_obj, *out_obj, *path_obj = Py_None;
    enum path path;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|$O:dots", keywords, &rows_obj, &queries_obj, &out_obj,
                                     &path_obj) || path_of(path_obj, &path) < 0)
        return NULL;
    Py_buffer rows, queries, out;
    if (get_inputs(rows_obj, queries_obj, &rows, &queries) < 0)
        return NULL;
    if (get_array(out_obj, &out, "f", 2, 1, "out") < 0) {
        PyBuffer_Release(&rows);
        PyBuffer_Release(&queries);
        return NULL;
    }
    const Py_ssize_t n = rows.shape[0], nq = queries.shape[0];
    int ok = -1;
    if (out.shape[0] != n || out.shape[1] != nq)
        PyErr_Format(PyExc_ValueError, "out must be (%zd, %zd), got (%zd, %zd)", n, nq, out.shape[0], out.shape[1]);
    else
        ok = run_released(&rows, n, &queries, (sink_t){.out = out.buf, .stride = nq}, path);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&queries);
    PyBuffer_Release(&out);
    return ok < 0 ? NULL : Py_NewRef(Py_None);
}

/* The ``best`` and ``sum`` arrays of best() and best4() (``sum_obj`` may be None), ``n`` values each: 0 with
 * ``sink`` pointing into the views (release them with release_sinks), or -1 with an exception and nothing held. */
static int get_sinks(PyObject *best_obj, PyObject *sum_obj, Py_ssize_t n, Py_buffer *best_view, Py_buffer *sum_view,
                     sink_t *sink)
{
    const int have_sum = sum_obj != Py_None;
    if (get_array(best_obj, best_view, "f", 1, 1, "best") < 0)
        return -1;
    if (have_sum && get_array(sum_obj, sum_view, "f", 1, 1, "sum") < 0) {
        PyBuffer_Release(best_view);
        return -1;
    }
    if (best_view->shape[0] != n || (have_sum && sum_view->shape[0] != n)) {
        PyErr_Format(PyExc_ValueError, "best and sum must hold %zd values, one a row", n);
        PyBuffer_Release(best_view);
        if (have_sum)
            PyBuffer_Release(sum_view);
        return -1;
    }
    *sink = (sink_t){.best = best_view->buf, .sum = have_sum ? sum_view->buf : NULL};
    return 0;
}

static void release_sinks(Py_buffer *best_view, Py_buffer *sum_view, PyObject *sum_obj)
{
    PyBuffer_Release(best_view);
    if (sum_obj != Py_None)
        PyBuffer_Release(sum_view);
}

/* A 1-d int64 array of indices (best()'s ``at``, best_shifted()'s ``groups``), each checked against ``bound``
 * (an index out of range would read outside the array it indexes); 0, or -1 with an exception and nothing
 * held. ``what``: the things indexed, for the message. */
static int get_indices(PyObject *obj, Py_ssize_t bound, Py_buffer *view, const char *name, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous array of int64", name);
        return -1;
    }
    const char *f = view->format;
    if (f[0] == '@' || f[0] == '=' || f[0] == '<')
        f++;
    if (view->ndim != 1 || view->itemsize != 8 || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
        PyErr_Format(PyExc_TypeError, "%s must be a 1-d array of int64 (got %d-d, format '%s')", name, view->ndim,
                     view->format);
        PyBuffer_Release(view);
        return -1;
    }
    const int64_t *at = view->buf;
    for (Py_ssize_t i = 0; i < view->shape[0]; i++)
        if (at[i] < 0 || at[i] >= bound) {
            PyErr_Format(PyExc_IndexError, "%s[%zd] = %lld is not one of the %zd %s", name, i, (long long)at[i],
                         bound, what);
            PyBuffer_Release(view);
            return -1;
        }
    return 0;
}

static PyObject *best(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rows", "queries", "best", "sum", "at", "path", NULL};
    PyObject *rows_obj, *queries_obj, *best_obj, *sum_obj = Py_None, *at_obj = Py_None, *path_obj = Py_None;
    enum path path;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O$OO:best", keywords, &rows_obj, &queries_obj, &best_obj,
                                     &sum_obj, &at_obj, &path_obj) || path_of(path_obj, &path) < 0)
        return NULL;
    Py_buffer rows, queries, best_view, sum_view, at_view;
    if (get_inputs(rows_obj, queries_obj, &rows, &queries) < 0)
        return NULL;
    const int have_at = at_obj != Py_None;
    sink_t sink;
    int ok = -1;
    if (queries.shape[0] == 0)
        PyErr_SetString(PyExc_ValueError, "at least one query vector");
    else if (!have_at || get_indices(at_obj, rows.shape[0], &at_view, "at", "rows") == 0) {
        const Py_ssize_t n = have_at ? at_view.shape[0] : rows.shape[0];
        if (get_sinks(best_obj, sum_obj, n, &best_view, &sum_view, &sink) == 0) {
            sink.at = have_at ? at_view.buf : NULL;
            ok = run_released(&rows, n, &queries, sink, path);
            release_sinks(&best_view, &sum_view, sum_obj);
        }
        if (have_at)
            PyBuffer_Release(&at_view);
    }
    PyBuffer_Release(&rows);
    PyBuffer_Release(&queries);
    return ok < 0 ? NULL : Py_NewRef(Py_None);
}

/* best() under a language shift (:c:type:`shift_t`), for at most GROUP query vectors: each row's best shifted
 * score into ``best``, scaled as numpy scales it, so the stage writes no block of products to shift. */
static PyObject *best_shifted(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rows", "queries", "best", "scales", "factor", "groups", "by", "whole_by", "inv_norm",
                               "path", NULL};
    PyObject *rows_obj, *queries_obj, *best_obj, *scales_obj, *groups_obj, *by_obj, *whole_obj = Py_None,
        *path_obj = Py_None;
    float factor, inv_norm = 0.0f;
    enum path path;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOfOO|Of$O:best_shifted", keywords, &rows_obj, &queries_obj,
                                     &best_obj, &scales_obj, &factor, &groups_obj, &by_obj, &whole_obj, &inv_norm,
                                     &path_obj) || path_of(path_obj, &path) < 0)
        return NULL;
    Py_buffer rows, queries, best_view, scales, groups, by, whole;
    int held = 0, ok = -1;  /* held: how many of best_view, scales, by, groups, whole are held, in that order */
    if (get_inputs(rows_obj, queries_obj, &rows, &queries) < 0)
        return NULL;
    const Py_ssize_t n = rows.shape[0], nq = queries.shape[0];
    if (nq < 1 || nq > GROUP) {
        PyErr_Format(PyExc_ValueError, "between 1 and %d query vectors (got %zd)", GROUP, nq);
        goto done;
    }
    if (get_array(best_obj, &best_view, "f", 1, 1, "best") < 0)
        goto done;
    held = 1;
    if (get_array(scales_obj, &scales, "f", 1, 0, "scales") < 0)
        goto done;
    held = 2;
    if (get_array(by_obj, &by, "f", 2, 0, "by") < 0)
        goto done;
    held = 3;
    if (best_view.shape[0] != n || scales.shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "best and scales must hold %zd values, one a row", n);
        goto done;
    }
    if (by.shape[0] != nq || by.shape[1] < 1) {
        PyErr_Format(PyExc_ValueError, "by must be (%zd, groups), got (%zd, %zd)", nq, by.shape[0], by.shape[1]);
        goto done;
    }
    if (get_indices(groups_obj, by.shape[1], &groups, "groups", "groups") < 0)
        goto done;
    held = 4;
    if (groups.shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "groups must hold %zd values, one a row", n);
        goto done;
    }
    if (whole_obj != Py_None) {
        if (get_array(whole_obj, &whole, "f", 1, 0, "whole_by") < 0)
            goto done;
        held = 5;
        if (whole.shape[0] != by.shape[1]) {
            PyErr_Format(PyExc_ValueError, "whole_by must hold %zd values, one a group", by.shape[1]);
            goto done;
        }
    }
    shift_t shift = {.scales = scales.buf, .by = by.buf, .whole_by = held == 5 ? whole.buf : NULL,
                     .groups = groups.buf, .n_groups = by.shape[1], .factor = factor, .inv_norm = inv_norm};
    sink_t sink = {.best = best_view.buf, .first = 1, .shift = &shift};
    ok = run_released(&rows, n, &queries, sink, path);
done:
    if (held >= 5)
        PyBuffer_Release(&whole);
    if (held >= 4)
        PyBuffer_Release(&groups);
    if (held >= 3)
        PyBuffer_Release(&by);
    if (held >= 2)
        PyBuffer_Release(&scales);
    if (held >= 1)
        PyBuffer_Release(&best_view);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&queries);
    return ok < 0 ? NULL : Py_NewRef(Py_None);
}

/* Bytes a row of ``d`` columns takes in int4 tiles: d / 2 rounded up to a multiple of 4. */
static Py_ssize_t tile_row_bytes(Py_ssize_t d)
{
    return (d / 2 + 3) / 4 * 4;
}

static PyObject *best4(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"tiles", "queries", "best", "sum", "scales", "factor", "inv_norm", "path", NULL};
    PyObject *tiles_obj, *queries_obj, *best_obj, *sum_obj = Py_None, *scales_obj = Py_None, *path_obj = Py_None;
    float factor = 1.0f, inv_norm = 0.0f;
    enum path path;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O$OffO:best4", keywords, &tiles_obj, &queries_obj, &best_obj,
                                     &sum_obj, &scales_obj, &factor, &inv_norm, &path_obj) ||
        path_of(path_obj, &path) < 0)
        return NULL;
    Py_buffer tiles, queries, best_view, sum_view, scales;
    int have_scales = 0;
    if (get_array(tiles_obj, &tiles, "B", 2, 0, "tiles") < 0)
        return NULL;
    if (get_array(queries_obj, &queries, "b", 2, 0, "queries") < 0) {
        PyBuffer_Release(&tiles);
        return NULL;
    }
    const Py_ssize_t d = queries.shape[1], nq = queries.shape[0], hp = tile_row_bytes(d);
    Py_ssize_t n = -1;
    if (PyObject_GetBuffer(best_obj, &best_view, PyBUF_ND) == 0) {  /* the rows scored: one best a row */
        n = best_view.ndim == 1 ? best_view.shape[0] : -1;
        PyBuffer_Release(&best_view);
    }
    else
        PyErr_Clear();
    sink_t sink;
    int ok = -1;
    if (d % 2)
        PyErr_Format(PyExc_ValueError, "queries must have an even number of columns (got %zd)", d);
    else if (d > MAX_DIM)
        PyErr_Format(PyExc_ValueError, "at most %d columns (got %zd)", MAX_DIM, d);
    else if (nq == 0)
        PyErr_SetString(PyExc_ValueError, "at least one query vector");
    else if (scales_obj != Py_None && nq > GROUP)
        PyErr_Format(PyExc_ValueError, "at most %d query vectors with scales (got %zd)", GROUP, nq);
    else if (scales_obj != Py_None && (have_scales = get_array(scales_obj, &scales, "f", 1, 0, "scales") == 0) == 0)
        ;
    else if (have_scales && n >= 0 && scales.shape[0] != n)  /* a best that is not 1-d: get_sinks says so */
        PyErr_Format(PyExc_ValueError, "scales must hold %zd values, one a row", n);
    else if (n >= 0 && (tiles.shape[0] != (n + TILE - 1) / TILE || tiles.shape[1] != TILE * hp))
        PyErr_Format(PyExc_ValueError, "%zd rows of %zd columns are (%zd, %zd) tiles, got (%zd, %zd)", n, d,
                     (n + TILE - 1) / TILE, TILE * hp, tiles.shape[0], tiles.shape[1]);
    else if (get_sinks(best_obj, sum_obj, n < 0 ? 0 : n, &best_view, &sum_view, &sink) == 0) {
        const uint8_t *t = tiles.buf;
        const int8_t *q = queries.buf;
        const finish_t finish = {.scales = have_scales ? scales.buf : NULL, .factor = factor, .inv_norm = inv_norm};
        sink.finish = have_scales ? &finish : NULL;
        Py_BEGIN_ALLOW_THREADS
        run4(t, n, d / 2, hp, q, nq, sink, path);
        Py_END_ALLOW_THREADS
        release_sinks(&best_view, &sum_view, sum_obj);
        ok = 0;
    }
    if (have_scales)
        PyBuffer_Release(&scales);
    PyBuffer_Release(&tiles);
    PyBuffer_Release(&queries);
    return ok < 0 ? NULL : Py_NewRef(Py_None);
}

/* int8 codes (n, w), w even, as best4's int4 tiles (ceil(n / TILE), TILE * hp): each code c rounded to
 * c * 7 / 127 (no code lies half way: 127 is prime), plus 8, column k in the low four bits and column w / 2 + k
 * in the high four of row byte k; the padding 0x88. */
static void int4_tiles(const int8_t *codes, Py_ssize_t n, Py_ssize_t w, uint8_t *out)
{
    const Py_ssize_t h = w / 2, hp = tile_row_bytes(w);
    memset(out, 0x88, (size_t)((n + TILE - 1) / TILE * TILE * hp));
    for (Py_ssize_t i = 0; i < n; i++) {
        const int8_t *c = codes + i * w;
        for (Py_ssize_t k = 0; k < h; k++) {
            const int32_t a = c[k], b = c[h + k];
            const int32_t lo = (a * 14 + (a >= 0 ? 127 : -127)) / 254 + 8;
            const int32_t hi = (b * 14 + (b >= 0 ? 127 : -127)) / 254 + 8;
            out[tile_at(i, k, hp)] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static PyObject *to_int4(PyObject *self, PyObject *args)
{
    PyObject *codes_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OO:to_int4", &codes_obj, &out_obj))
        return NULL;
    Py_buffer codes, out;
    if (get_array(codes_obj, &codes, "b", 2, 0, "codes") < 0)
        return NULL;
    if (get_array(out_obj, &out, "B", 2, 1, "out") < 0) {
        PyBuffer_Release(&codes);
        return NULL;
    }
    const Py_ssize_t n = codes.shape[0], w = codes.shape[1], tiles = (n + TILE - 1) / TILE;
    int ok = -1;
    if (w % 2)
        PyErr_Format(PyExc_ValueError, "an even number of columns (got %zd)", w);
    else if (w > MAX_DIM)
        PyErr_Format(PyExc_ValueError, "at most %d columns (got %zd)", MAX_DIM, w);
    else if (out.shape[0] != tiles || out.shape[1] != TILE * tile_row_bytes(w))
        PyErr_Format(PyExc_ValueError, "out must be (%zd, %zd), got (%zd, %zd)", tiles, TILE * tile_row_bytes(w),
                     out.shape[0], out.shape[1]);
    else {
        const int8_t *c = codes.buf;
        uint8_t *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        int4_tiles(c, n, w, o);
        Py_END_ALLOW_THREADS
        ok = 0;
    }
    PyBuffer_Release(&codes);
    PyBuffer_Release(&out);
    return ok < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *tile_shape(PyObject *self, PyObject *args)
{
    Py_ssize_t n, w;
    if (!PyArg_ParseTuple(args, "nn:tile_shape", &n, &w))
        return NULL;
    if (n < 0 || w < 0 || w % 2) {
        PyErr_Format(PyExc_ValueError, "a row count and an even number of columns (got %zd, %zd)", n, w);
        return NULL;
    }
    return Py_BuildValue("(nn)", (n + TILE - 1) / TILE, TILE * tile_row_bytes(w));
}

static PyObject *kernel(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(PATH_NAMES[default_path()]);
}

static PyObject *paths(PyObject *self, PyObject *unused)
{
    PyObject *out = PyList_New(0);
    for (int p = 0; out != NULL && p < PATHS; p++) {
        if (!runs((enum path)p))
            continue;
        PyObject *name = PyUnicode_FromString(PATH_NAMES[p]);
        if (name == NULL || PyList_Append(out, name) < 0)
            Py_CLEAR(out);
        Py_XDECREF(name);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"dots", (PyCFunction)(void (*)(void))dots, METH_VARARGS | METH_KEYWORDS,
     "dots(rows, queries, out, *, path=None)\n--\n\nout[i, j] = rows[i] . queries[j], exact: int8 rows (n, d) "
     "and queries (q, d), float32 out (n, q), all C-contiguous; d <= 1024. The GIL is released while it runs. "
     "path: one of paths(), default kernel()."},
    {"best", (PyCFunction)(void (*)(void))best, METH_VARARGS | METH_KEYWORDS,
     "best(rows, queries, best, sum=None, *, at=None, path=None)\n--\n\nEach row's largest product over the "
     "query vectors into best (n,), exact, and their sum into sum (n,) when given, both float32: what dots() "
     "gives without writing every product. at: an int64 array of row numbers (m,): only those rows, in that "
     "order, into best and sum (m,). At least one query vector."},
    {"best_shifted", (PyCFunction)(void (*)(void))best_shifted, METH_VARARGS | METH_KEYWORDS,
     "best_shifted(rows, queries, best, scales, factor, groups, by, whole_by=None, inv_norm=0.0, *, path=None)\n--\n\n"
     "best() under a language shift, for 1 to 8 query vectors: each row's largest of "
     "p * factor * scales[i] - by[j, groups[i]] over the query vectors j (p the exact product), and with whole_by "
     "also sum(p) * inv_norm * factor * scales[i] - whole_by[groups[i]], each step rounded to float32, into best "
     "(n,). scales float32 (n,), groups int64 (n,) each in 0..G-1, by float32 (q, G), whole_by float32 (G,)."},
    {"best4", (PyCFunction)(void (*)(void))best4, METH_VARARGS | METH_KEYWORDS,
     "best4(tiles, queries, best, sum=None, *, scales=None, factor=1.0, inv_norm=0.0, path=None)\n--\n\nbest() "
     "for int4 rows in to_int4()'s tiles: uint8 tiles (ceil(n / 16), 16 * hp) of n rows, n = len(best); int8 "
     "queries (q, d), d even. Exact integer products. With float32 scales (n,), for at most 8 query vectors, "
     "each row's best finished as the scan scores it: b * factor * scales[i], b the best product or, when "
     "inv_norm is not 0, the sum of the products times inv_norm where larger, each step rounded to float32."},
    {"to_int4", to_int4, METH_VARARGS,
     "to_int4(codes, out)\n--\n\nint8 codes (n, w), w even, as best4's int4 tiles into uint8 out, of "
     "tile_shape(n, w): each code rounded to code * 7 / 127, plus 8, column k in the low four bits and column "
     "w / 2 + k in the high four of a row's byte k; sixteen rows a tile, interleaved four bytes at a time."},
    {"tile_shape", tile_shape, METH_VARARGS,
     "tile_shape(n, w)\n--\n\nThe shape of the int4 tiles of n rows of w columns: (ceil(n / 16), 16 * hp), "
     "hp = w / 2 rounded up to a multiple of 4."},
    {"kernel", kernel, METH_NOARGS,
     "kernel()\n--\n\nThe path dots() and best() take on this core by default: 'avx512vnni', 'avx2' or "
     "'portable'."},
    {"paths", paths, METH_NOARGS, "paths()\n--\n\nEvery path this core runs, widest first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_int8dots", NULL, 0, methods};

PyMODINIT_FUNC PyInit__int8dots(void)
{
#if HAVE_X86
    __builtin_cpu_init();
#endif
    return PyModule_Create(&module);
}
