/* Tile schedule of the grouped GEMM, host- and device-callable (CPU-tested).
 *
 * Expert e owns rows [row_offset[e], row_offset[e] + row_count[e]) of A and of the output (the
 * contiguous form: offsets are a prefix sum, segments optionally padded; the masked form:
 * row_offset[e] = e * max_rows). It is cut into ceil(count / BM) row tiles, each paired with every
 * one of N / BN column tiles. tile_start[e] is the prefix sum of row tiles, so a flat work index
 * maps to (expert, row tile, column tile) by a binary search; tiles never straddle experts. */
#ifndef MEGAMOE_GEMM_SCHEDULE_H
#define MEGAMOE_GEMM_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recipe.h" /* MM_HD */

#define MM_GEMM_BM 128
#define MM_GEMM_BN 128
#define MM_GEMM_BK 128

MM_HD int mm_row_tiles(int rows)
{
    return (rows + MM_GEMM_BM - 1) / MM_GEMM_BM;
}

/* tile_start[0..experts]: prefix sum of row tiles; returns the total. */
MM_HD int mm_tile_prefix(const int32_t *row_count, int experts, int32_t *tile_start)
{
    int total = 0;
    for (int e = 0; e < experts; e++) {
        tile_start[e] = total;
        total += mm_row_tiles(row_count[e] > 0 ? row_count[e] : 0);
    }
    tile_start[experts] = total;
    return total;
}

typedef struct {
    int expert;
    int row_tile; /* within the expert */
    int col_tile;
} mm_tile;

/* Work item w in [0, total_row_tiles * col_tiles) -> its tile. Column tiles vary fastest, so
 * consecutive CTAs share A rows (and stream different weight columns). */
MM_HD mm_tile mm_tile_locate(const int32_t *tile_start, int experts, int col_tiles, int w)
{
    mm_tile t;
    int row = w / col_tiles;
    t.col_tile = w % col_tiles;
    int lo = 0, hi = experts - 1; /* last expert whose start <= row */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tile_start[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    t.expert = lo;
    t.row_tile = row - tile_start[lo];
    return t;
}

/* Row r_in_tile of flat row tile `tile_flat` (one column tile): its row index in A, or false
 * when the tile's expert has fewer rows. */
MM_HD bool mm_tile_row_index(const int32_t *tile_start, const int32_t *row_offset, const int32_t *row_count,
                             int experts, int tile_flat, int r_in_tile, size_t *row)
{
    mm_tile t = mm_tile_locate(tile_start, experts, 1, tile_flat);
    int local = t.row_tile * MM_GEMM_BM + r_in_tile;
    if (local >= row_count[t.expert]) return false;
    *row = (size_t)row_offset[t.expert] + local;
    return true;
}

/* The A side of a tile when its rows lie in a few contiguous runs: TMA boxes of 128, 64, 32, 16
 * or 8 rows (a map per height), each landing at a multiple of 8 rows in the stage, so the
 * 128-byte swizzle (period 8 rows) matches the gathered layout. n == 0: the rows are gathered
 * through the row table. Rows of the stage no box covers keep stale bytes: their results are
 * never stored. */
#define MM_TILE_A_BOXES 16
#define MM_TILE_A_HEIGHTS 5 /* box heights 128 >> j, j < 5 */
typedef struct {
    int n;
    unsigned bytes; /* the boxes' rows x 128 */
    const void *map[MM_TILE_A_BOXES];
    int row0[MM_TILE_A_BOXES];    /* the box's first row in its map */
    int dst_row[MM_TILE_A_BOXES]; /* where it lands in the stage (a multiple of 8) */
} mm_tile_a_boxes;

/* Appends the boxes that copy `h` rows (a multiple of 8) from row `src` of the maps (maps[j]:
 * boxes of 128 >> j rows) to stage row `dst`, largest first. False when they do not fit. */
MM_HD bool mm_tile_a_add_run(mm_tile_a_boxes *ab, const void *const maps[MM_TILE_A_HEIGHTS], int src, int dst,
                             int h)
{
    if (h % 8 || dst % 8) return false;
    for (int j = 0; j < MM_TILE_A_HEIGHTS && h > 0; j++) {
        const int box = 128 >> j;
        while (h >= box) {
            if (ab->n == MM_TILE_A_BOXES) return false;
            ab->map[ab->n] = maps[j];
            ab->row0[ab->n] = src;
            ab->dst_row[ab->n] = dst;
            ab->n++;
            ab->bytes += (unsigned)box * 128u;
            src += box;
            dst += box;
            h -= box;
        }
    }
    return h == 0;
}

/* A fused row tile's runs: the expert's rows are its senders' segments in rank order, segment s
 * holding cnt[s] rows rounded up to `seg` (a multiple of 8) at rows region0 + s * region_rows of
 * the maps; the tile covers logical rows [t0, t0 + rows). False when it needs more boxes than
 * fit (the caller gathers instead). */
MM_HD bool mm_tile_a_segment_boxes(mm_tile_a_boxes *ab, const void *const maps[MM_TILE_A_HEIGHTS], const int *cnt,
                                   int ranks, int seg, int region0, int region_rows, int t0, int rows)
{
    ab->n = 0;
    ab->bytes = 0;
    for (int q = 0, p0 = 0; q < ranks; q++) {
        const int len = (cnt[q] + seg - 1) / seg * seg;
        const int lo = p0 > t0 ? p0 : t0, hi = p0 + len < t0 + rows ? p0 + len : t0 + rows;
        if (hi > lo && !mm_tile_a_add_run(ab, maps, region0 + q * region_rows + lo - p0, lo - t0, hi - lo)) {
            ab->n = 0;
            return false;
        }
        p0 += len;
    }
    return true;
}

#endif
