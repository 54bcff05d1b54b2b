/* Buffer layouts of every mode, defined once: `plan` sizes them, the runtime allocates them and
 * the kernels carve them with the same offsets. Plain C, usable from host C and from CUDA.
 *
 * Symbols: H hidden, I intermediate, E experts, K top-k, R ranks, El = E / R local experts,
 * T the mode's maximum tokens per rank, BM the GEMM tile height (rows an expert segment is padded
 * to). An FP8 activation row of width W carries W bytes plus W/128 FP32 scales.
 *
 * Regions are 256-byte aligned so TMA and 16-byte vector accesses never straddle a region. */
#ifndef MEGAMOE_LAYOUT_H
#define MEGAMOE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define MM_LAYOUT_ALIGN 256
#define MM_LAYOUT_MAX_REGIONS 12
#define MM_GEMM_BLOCK_M 128     /* tile height an expert segment is padded to */
#define MM_ROW_META_BYTES 16    /* per dispatched row: source rank, token, k slot, weight */
#define MM_SIGNAL_WORDS 64      /* barrier and epoch words at the head of every symmetric buffer */

typedef struct {
    int64_t hidden, inter, experts, topk, ranks, max_tokens;
} mm_shape;

typedef struct {
    const char *name; /* what the region holds, with its formula in the comment where it is added */
    uint64_t offset;
    uint64_t bytes;
} mm_region;

typedef struct {
    mm_region region[MM_LAYOUT_MAX_REGIONS];
    int count;
    uint64_t total;
} mm_layout;

static inline uint64_t mm_align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static inline void mm_layout_add(mm_layout *l, const char *name, uint64_t bytes)
{
    mm_region *r = &l->region[l->count++];
    r->name = name;
    r->offset = l->total;
    r->bytes = bytes;
    l->total = mm_align_up(l->total + bytes, MM_LAYOUT_ALIGN);
}

static inline uint64_t mm_fp8_row_bytes(int64_t width)
{
    return (uint64_t)width + (uint64_t)(width / 128) * 4u;
}

static inline int64_t mm_local_experts(const mm_shape *s)
{
    return s->experts / s->ranks;
}

/* Rows a rank may have to hold, one per (token, local expert) pair, each expert's segment padded
 * to BM: R * T * min(K, El) + El * (BM - 1). */
static inline int64_t mm_pair_capacity(const mm_shape *s)
{
    int64_t el = mm_local_experts(s);
    int64_t per_token = s->topk < el ? s->topk : el;
    return s->ranks * s->max_tokens * per_token + el * (MM_GEMM_BLOCK_M - 1);
}

/* One dispatched row of the normal pipeline: H FP8 bytes, H/128 FP32 scales padded to 16 B, then
 * a header padded to 16 B: the token's top-k ids as the receiver sees them (local id or -1), its
 * K weights, and its index on the sender. */
static inline uint64_t mm_normal_row_bytes(const mm_shape *s)
{
    return (uint64_t)s->hidden + mm_align_up((uint64_t)(s->hidden / 128) * 4u, 16) +
           mm_align_up((uint64_t)s->topk * 8u + 4u, 16);
}

/* Region indices, so kernels and host name them instead of counting. */
enum { NORMAL_COUNTS, NORMAL_DISPATCH_RECV, NORMAL_COMBINE_RECV };
enum { NORMAL_XQ, NORMAL_XQ_SCALES, NORMAL_TOKEN_SLOT, NORMAL_COUNTERS, NORMAL_SCHEDULE, NORMAL_PACKED_X,
       NORMAL_PACKED_SCALES, NORMAL_PACKED_META, NORMAL_GEMM1_OUT, NORMAL_ACT, NORMAL_ACT_SCALES,
       NORMAL_GEMM2_OUT };

/* normal, symmetric part. Every peer may send each of its T tokens once; the waits are the
 * runtime's device barriers between stages, so there are no signal words here. */
static inline mm_layout mm_layout_normal_sym(const mm_shape *s)
{
    mm_layout l = {0};
    int64_t el = mm_local_experts(s);
    /* [R][1 + El] int32: sender s's rows for this rank, then per local expert */
    mm_layout_add(&l, "counts", (uint64_t)(s->ranks * (1 + el)) * 4u);
    /* [R][T] rows of mm_normal_row_bytes, sender s's block at the prefix of the counts */
    mm_layout_add(&l, "dispatch_recv", (uint64_t)(s->ranks * s->max_tokens) * mm_normal_row_bytes(s));
    /* [R][T][H] BF16: each rank's partial sum (its experts) of each of my tokens */
    mm_layout_add(&l, "combine_recv", (uint64_t)(s->ranks * s->max_tokens * s->hidden) * 2u);
    return l;
}

/* normal, local workspace: the quantized tokens, the layout, and the expert-contiguous pipeline
 * between dispatch and combine (each expert's rows padded to the tile height). */
static inline mm_layout mm_layout_normal_local(const mm_shape *s)
{
    mm_layout l = {0};
    int64_t el = mm_local_experts(s);
    uint64_t rows = (uint64_t)mm_pair_capacity(s), t = (uint64_t)s->max_tokens;
    mm_layout_add(&l, "x_fp8", t * (uint64_t)s->hidden);
    mm_layout_add(&l, "x_scales", t * (uint64_t)(s->hidden / 128) * 4u);
    /* [T][R] int32: the token's slot in its block at rank r, -1 when it does not go there */
    mm_layout_add(&l, "token_slot", t * (uint64_t)s->ranks * 4u);
    /* zeroed each call: send count [R], expert count [E], permute fill [El], done CTAs [2]; then
     * send offset [R], receive base [R + 1] */
    mm_layout_add(&l, "counters", (uint64_t)(s->ranks + s->experts + el + 2 + s->ranks + s->ranks + 1) * 4u);
    /* row_offset [El + 1], row_count [El], tile_start [El + 1] */
    mm_layout_add(&l, "schedule", (uint64_t)(3 * el + 2) * 4u);
    mm_layout_add(&l, "permuted_x", rows * (uint64_t)s->hidden);
    mm_layout_add(&l, "permuted_scales", rows * (uint64_t)(s->hidden / 128) * 4u);
    /* 16 B per row: receive row, token, k, weight; then perm_index [R*T][K] int32 */
    mm_layout_add(&l, "permuted_meta", rows * MM_ROW_META_BYTES + (uint64_t)(s->ranks * s->max_tokens * s->topk) * 4u);
    mm_layout_add(&l, "gemm1_out_f32", rows * (uint64_t)s->inter * 2u * 4u);
    mm_layout_add(&l, "act_fp8", rows * (uint64_t)s->inter);
    mm_layout_add(&l, "act_scales", rows * (uint64_t)(s->inter / 128) * 4u);
    mm_layout_add(&l, "gemm2_out_bf16", rows * (uint64_t)s->hidden * 2u);
    return l;
}

enum { LL_PACKED_X, LL_PACKED_SCALES, LL_PACKED_META, LL_GEMM1_OUT, LL_ACT, LL_ACT_SCALES,
       LL_GEMM2_OUT, LL_SCHEDULE };

/* One dispatched row on the wire: FP8 row, its per-128 scales padded to 16 B, then the row's
 * meta, so every row and every part of it is 16-byte aligned for vector stores. */
static inline uint64_t mm_ll_row_bytes(const mm_shape *s)
{
    return (uint64_t)s->hidden + mm_align_up((uint64_t)(s->hidden / 128) * 4u, 16) + MM_ROW_META_BYTES;
}

/* One row of fused's dispatch: H FP8 bytes and H/128 FP32 scales padded to 16 B. It crosses the
 * link once per destination rank however many of its experts live there; the per-expert metas
 * travel separately (16 B each). */
static inline uint64_t mm_fused_row_bytes(const mm_shape *s)
{
    return (uint64_t)s->hidden + mm_align_up((uint64_t)(s->hidden / 128) * 4u, 16);
}

/* The exchange region ll and fused each have in the symmetric buffer (after the runtime's head):
 * the same epoch-tagged count slots, combine flags and combine rows; the dispatched rows differ:
 * ll receives a wire row per (token, expert) as DeepEP's low-latency mode does, fused a row per
 * (token, rank) and a meta per (token, expert). Every wait is on a 64-bit slot tagged with the
 * call's epoch, so nothing is ever cleared between calls. */
enum { XCHG_STATE, XCHG_COUNTS, XCHG_COMBINE_FLAGS, XCHG_DISPATCH_RECV, XCHG_COMBINE_RECV, XCHG_DISPATCH_META,
       XCHG_DISPATCH_READY };
static inline mm_layout mm_layout_exchange_sym(const mm_shape *s, uint64_t state_bytes, int rows_per_rank)
{
    mm_layout l = {0};
    int64_t el = mm_local_experts(s);
    uint64_t pairs = (uint64_t)(el * s->ranks * s->max_tokens);
    /* this rank's own words: epoch (u64) at 0, counters (u32) at 8, [E] send slots (u32) from
     * 32, then whatever the mode adds */
    mm_layout_add(&l, "state", state_bytes);
    /* [El][R] uint64: (epoch << 32) | rows sent by rank r to local expert e */
    mm_layout_add(&l, "counts", (uint64_t)(el * s->ranks) * 8u);
    /* [R] uint64: epoch once rank r has written all its combine rows for us */
    mm_layout_add(&l, "combine_flags", (uint64_t)s->ranks * 8u);
    if (rows_per_rank) /* fused: [R][T] rows of mm_fused_row_bytes, sender r's token t at [r][t] */
        mm_layout_add(&l, "dispatch_recv", (uint64_t)(s->ranks * s->max_tokens) * mm_fused_row_bytes(s));
    else /* ll: [El][R][T] wire rows of mm_ll_row_bytes */
        mm_layout_add(&l, "dispatch_recv", pairs * mm_ll_row_bytes(s));
    /* [T][K][H] BF16 expert outputs coming home, summed in k order */
    mm_layout_add(&l, "combine_recv", (uint64_t)(s->max_tokens * s->topk * s->hidden) * 2u);
    /* fused: [El][R][T] metas {src rank, token, k, weight}: sender r's rows for local expert e */
    if (rows_per_rank) mm_layout_add(&l, "dispatch_meta", pairs * MM_ROW_META_BYTES);
    /* fused: [El][R][T] uint32, the call's epoch once that meta and its row are there (a sender
     * with few tokens publishes its counts first and signals each row; fused.cu) */
    if (rows_per_rank) mm_layout_add(&l, "dispatch_ready", pairs * 4u);
    return l;
}

/* ll: counters at 8 are its 2 done counters */
static inline mm_layout mm_layout_ll_sym(const mm_shape *s)
{
    return mm_layout_exchange_sym(s, 32u + (uint64_t)s->experts * 4u, 0);
}

/* ll, local workspace: the masked layout [El][R*T][...] of the GEMM core. */
static inline mm_layout mm_layout_ll_local(const mm_shape *s)
{
    mm_layout l = {0};
    int64_t el = mm_local_experts(s);
    uint64_t rows = (uint64_t)(el * s->ranks * s->max_tokens);
    mm_layout_add(&l, "packed_x", rows * (uint64_t)s->hidden);
    mm_layout_add(&l, "packed_scales", rows * (uint64_t)(s->hidden / 128) * 4u);
    mm_layout_add(&l, "packed_meta", rows * MM_ROW_META_BYTES);
    mm_layout_add(&l, "gemm1_out_f32", rows * (uint64_t)s->inter * 2u * 4u);
    mm_layout_add(&l, "act_fp8", rows * (uint64_t)s->inter);
    mm_layout_add(&l, "act_scales", rows * (uint64_t)(s->inter / 128) * 4u);
    mm_layout_add(&l, "gemm2_out_bf16", rows * (uint64_t)s->hidden * 2u);
    /* row_offset [El], row_count [El], tile_start [El + 1] */
    mm_layout_add(&l, "schedule", (uint64_t)(3 * el + 1) * 4u);
    return l;
}

#define MM_FUSED_TILE_ROWS 128 /* the GEMM core's tile height (MM_GEMM_BM) */

/* Row tiles the fused kernel may have to schedule: each local expert's rows cut into tiles of
 * MM_FUSED_TILE_ROWS; an expert holds at most R*T rows and all experts together at most
 * R * T * min(K, El). */
static inline int64_t mm_fused_max_row_tiles(const mm_shape *s)
{
    int64_t el = mm_local_experts(s), rt = s->ranks * s->max_tokens;
    int64_t per_token = s->topk < el ? s->topk : el;
    int64_t by_expert = el * ((rt + MM_FUSED_TILE_ROWS - 1) / MM_FUSED_TILE_ROWS);
    int64_t by_rows = rt * per_token / MM_FUSED_TILE_ROWS + el;
    return by_expert < by_rows ? by_expert : by_rows;
}

enum { FUSED_ACT, FUSED_ACT_SCALES };

/* fused: counters at 8 are dispatch, gemm2, exit and the work claim; after the send slots,
 * [row tiles] GEMM1-done counters (u32). The state lives in the symmetric buffer so a reset after
 * a timeout clears it with everything else. */
static inline mm_layout mm_layout_fused_sym(const mm_shape *s)
{
    return mm_layout_exchange_sym(s, 32u + (uint64_t)s->experts * 4u + (uint64_t)mm_fused_max_row_tiles(s) * 4u, 1);
}

#define MM_FUSED_ACT_EXTRA_ROWS 8 /* gemm_schedule.h's MM_FUSED_EXTRA_ROWS */

/* fused, local workspace: GEMM1's FP8 output (the SwiGLU'd, weighted, requantized rows), read by
 * GEMM2: each local expert's extra rows (a tile's rows past 128, gemm_schedule.h
 * mm_fused_extra_rows), then one 128-row block per row tile. */
static inline mm_layout mm_layout_fused_local(const mm_shape *s)
{
    mm_layout l = {0};
    /* compact: row tile t (flat over the experts) at rows El * 8 + 128 t (mm_fused_act_tile_row) */
    uint64_t rows = (uint64_t)mm_local_experts(s) * MM_FUSED_ACT_EXTRA_ROWS +
                    (uint64_t)mm_fused_max_row_tiles(s) * MM_FUSED_TILE_ROWS;
    mm_layout_add(&l, "act_fp8", rows * (uint64_t)s->inter);
    mm_layout_add(&l, "act_scales", rows * (uint64_t)(s->inter / 128) * 4u);
    return l;
}

#endif
