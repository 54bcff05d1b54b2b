/* The kernels' launch API, a table of contents of the CUDA side: every extern "C" launcher the
 * host (src/) calls and the plain argument structs passed to kernels by value, by concern: the
 * runtime and its self-tests, data generation, the GPU reference, the grouped GEMM core, the
 * activation stage, then one section per mode (ll, normal, fused) and the timing helpers.
 * Includable from C (host) and CUDA. Device-side types the kernels share are types.h. */
#ifndef MEGAMOE_API_H
#define MEGAMOE_API_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "datagen.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Ranks in NCCL's LSA team (load/store reachable) of this communicator (an ncclComm_t). */
int mm_nccl_lsa_ranks(void *nccl_comm);
cudaError_t mm_launch_peer_pointers(void *nccl_window, int ranks, char **out_device,
                                    cudaStream_t stream);
/* All ranks meet; one CTA. */
cudaError_t mm_launch_barrier(mm_comm comm, cudaStream_t stream);
/* Self-test: write a rank-tagged pattern into every peer's buffer at `offset`, then (after a
 * barrier) verify what the peers wrote into ours; mismatches counted into *bad. */
cudaError_t mm_launch_roundtrip_write(mm_comm comm, uint64_t offset, uint64_t words,
                                      cudaStream_t stream);
cudaError_t mm_launch_roundtrip_verify(mm_comm comm, uint64_t offset, uint64_t words,
                                       unsigned long long *bad, cudaStream_t stream);

/* Self-test: `ctas` resident CTAs do `rounds` grid syncs; scratch[2] counts visibility errors.
 * missing_cta >= 0 never arrives (expect a grid-sync TIMEOUT). scratch: 3 words, zeroed here. */
cudaError_t mm_launch_grid_sync_test(mm_comm comm, int ctas, unsigned int *scratch, int rounds,
                                     int missing_cta, cudaStream_t stream);

/* Self-test: the GPU's SwiGLU (mm_swiglu) of n inputs into h. */
cudaError_t mm_launch_swiglu_eval(const float *g, const float *u, const float *w, int n, int has_limit,
                                  float limit, float *h, cudaStream_t stream);

/* Self-test: hardware FP8 e4m3 conversion (SATFINITE) and the recipe's encoder of n inputs. */
cudaError_t mm_launch_fp8_compare(const float *in, int n, uint8_t *hw, uint8_t *ours,
                                  cudaStream_t stream);

/* Data generation on the GPU (bit-identical to the host's, datagen.h). */
cudaError_t mm_launch_gen_x(mm_x_params params, uint64_t first_token, int tokens, int hidden,
                            uint16_t *x, cudaStream_t stream);
cudaError_t mm_launch_gen_routing(mm_route_params params, uint64_t first_token, int tokens,
                                  int32_t *ids, float *weights, cudaStream_t stream);
/* Weights of `count` experts starting at global id first_expert: W1 [E][2I][H] and W2 [E][H][I]
 * FP8 with FP32 128x128 block scales [E][2I/128][H/128] and [E][H/128][I/128]. */
cudaError_t mm_launch_gen_weights(uint64_t seed, int first_expert, int count, int hidden, int inter,
                                  int ue8m0, uint8_t *w1, float *w1_scale, uint8_t *w2,
                                  float *w2_scale, cudaStream_t stream);
/* FP4 experts (kernels/fp4.h, generator pattern `pattern`): codes and UE8M0 exponents of W1
 * (c1 [E][2I][H/2], e1 [E][2I][H/32]) and W2 (c2 [E][H][I/2], e2 [E][H][I/32]), and each weight
 * block's word in the FP8 block scales' place (words1 [E][2I/128][H/128], words2
 * [E][H/128][I/128]; mm_launch_fp4_block_words), as a checkpoint loader would make them. */
cudaError_t mm_launch_gen_fp4_weights(uint64_t seed, int pattern, int first_expert, int count, int hidden, int inter,
                                      uint8_t *c1, uint8_t *e1, uint32_t *words1, uint8_t *c2, uint8_t *e2,
                                      uint32_t *words2, cudaStream_t stream);
/* Each weight block's word (fp4.h mm_fp4_block_word) of `rows` rows (a multiple of 128) of K / 32
 * exponents each, into words [rows / 128][K / 128]: the FP4 experts' counterpart of the FP8 block
 * scales, in their place (s1, s2; mm_expert_args, mm_grouped_gemm_args.w_scale). */
cudaError_t mm_launch_fp4_block_words(const uint8_t *exps, long long rows, int k, uint32_t *words, cudaStream_t stream);
/* Adds to *past the groups of `rows` rows (a multiple of 128) of K / 32 exponents each that lie
 * past the exact range of their 128 x 128 weight block (fp4.h mm_fp4_past_groups). */
cudaError_t mm_launch_fp4_past_groups(const uint8_t *exps, long long rows, int k, unsigned long long *past,
                                      cudaStream_t stream);
/* GPU reference (reference.cu): this rank's tokens through the whole layer, y in double. */
typedef struct {
    int tokens, hidden, inter, topk;
    int has_limit;
    double limit;
    int ue8m0;
    const uint16_t *x;      /* [T][H] BF16 */
    const int32_t *ids;     /* [T][K] global expert ids, -1 = none */
    const float *topk_w;    /* [T][K] */
    const uint8_t *w1;      /* [E][2I][H] every expert */
    const float *s1;        /* [E][2I/128][H/128] */
    const uint8_t *w2;      /* [E][H][I] */
    const float *s2;        /* [E][H/128][I/128] */
    /* FP4 experts instead (c1 not NULL; the FP8 pointers unused): codes and exponents as
     * mm_launch_gen_fp4_weights lays them out */
    const uint8_t *c1, *e1, *c2, *e2;
    void *workspace;        /* mm_reference_workspace_bytes */
    double *y;              /* [T][H] */
} mm_reference_args;

size_t mm_reference_workspace_bytes(int tokens, int hidden, int inter, int topk);
cudaError_t mm_launch_reference(mm_reference_args args, cudaStream_t stream);

/* Sums for calc_diff of a BF16 output against a double reference (zeroed by the launcher). */
typedef struct {
    double sum_ab, sum_aa_bb, max_abs, ref_max_abs;
    unsigned long long nonfinite;
} mm_device_diff;

cudaError_t mm_launch_compare(const uint16_t *out, const double *ref, long long n,
                              mm_device_diff *acc, cudaStream_t stream);

/* Recipe step 2 over rows of width `width` (BF16 in, FP8 + per-128 scales out). */
cudaError_t mm_launch_quantize_rows(const uint16_t *x, int rows, int width, int ue8m0, uint8_t *q,
                                    float *scale, cudaStream_t stream);
/* Reference grouped GEMM in double: row r uses expert expert_of_row[r] (-1: skipped). */
cudaError_t mm_launch_ref_gemm(const uint8_t *qa, const float *sa, const int32_t *expert_of_row,
                               int rows, const uint8_t *w, const float *sw, int n, int k,
                               double *out, cudaStream_t stream);
/* out[i] = in[i] (BF16) as double: lets mm_launch_compare take another BF16 output as reference. */
cudaError_t mm_launch_bf16_to_f64(const uint16_t *in, long long n, double *out, cudaStream_t stream);

/* Same as mm_launch_compare for an FP32 output. */
cudaError_t mm_launch_compare_f32(const float *out, const double *ref, long long n,
                                  mm_device_diff *acc, cudaStream_t stream);

/* Grouped FP8 GEMM core (gemm.cu): see its header comment. */
typedef struct {
    const uint8_t *a;          /* [rows][K] FP8 */
    const float *a_scale;      /* [rows][K/128] */
    const uint8_t *w;          /* [E][N][K] FP8 */
    const void *w_map;         /* mm_weight_map_create(w, E * N, K) */
    const float *w_scale;      /* [E][N/128][K/128] (FP4: the blocks' words, mm_launch_fp4_block_words) */
    const int32_t *row_offset; /* [E] first row of expert e */
    const int32_t *row_count;  /* [E] rows of expert e (device memory, read on the GPU) */
    int32_t *tile_start;       /* [E + 1] workspace: row-tile prefix, computed on the GPU */
    int experts, n, k;
    int out_fp32;              /* 0: BF16, 1: FP32 (next to k: the struct keeps its 128 bytes; a larger
                                * kernel parameter block changed ptxas's schedule of the whole kernel) */
    void *out;                 /* [rows][N] */
    const void *a_map;         /* mm_rows_map_create(a, rows, K), or NULL: rows gathered by cp.async */
    /* where a CTA whose pipeline wait expired reports it (as MM_PHASE_GEMM_PIPELINE; the first
     * failure of the rank wins): the runtime's record, or `megamoe gemm`'s own; NULL: not
     * reported (the output is then wrong) */
    mm_wait_error *error;
    uint32_t *abort_flag;
    int rank;
    const void *out_map;       /* mm_out_map_create(out, rows, N) for BF16 out, or NULL: rows stored from the registers */
} mm_grouped_gemm_args;

/* TMA descriptor (in device memory; cudaFree it) for weights [rows][k] FP8 (rows a multiple of
 * the tile width). */
cudaError_t mm_weight_map_create(const uint8_t *w, uint64_t rows, uint64_t k, void **map);
/* The same for GEMM inputs [rows][k] FP8 (any row count: boxes past the end read zeros). */
cudaError_t mm_rows_map_create(const uint8_t *a, uint64_t rows, uint64_t k, void **map);
/* TMA descriptor over a BF16 GEMM output [rows][n] in 64 x 64 boxes (128-byte swizzle): the
 * grouped GEMM stores each full 64-row half of a tile by two tensor copies. */
cudaError_t mm_out_map_create(void *out, uint64_t rows, uint64_t n, void **map);
int mm_grouped_gemm_smem_bytes(void);
int mm_grouped_gemm_band(void);
/* Whether the wide form's pairs claim their items from a counter (1) or walk a fixed order (0). */
cudaError_t mm_grouped_gemm_prepare(void);
/* `ctas` persistent CTAs (e.g. the SM count); max_rows: the most rows the caller knows an expert
 * has (<= 0: unknown), which picks the launch form only (mm_grouped_gemm_pairs); host_counts: a
 * host copy of row_count where the caller has one (NULL: unknown), which picks the tile
 * (mm_grouped_gemm_tile_rows; unknown: 128 x 128). */
cudaError_t mm_launch_grouped_gemm(mm_grouped_gemm_args args, int ctas, int max_rows, const int32_t *host_counts,
                                   cudaStream_t stream);
/* The same with FP4 experts (MXFP4, gemm_fp4.cuh): args.w_map from mm_fp4_codes_map_create over
 * the codes [E * N][K / 2], args.w the exponents [E * N][K / 32], args.w_scale the blocks' words
 * (mm_launch_fp4_block_words); `ctas` single CTAs on 128 x 128 tiles. */
cudaError_t mm_launch_grouped_gemm_fp4(mm_grouped_gemm_args args, int ctas, cudaStream_t stream);
/* TMA descriptor (cudaFree it) over FP4 codes [rows][k / 2] (rows a multiple of the tile width). */
cudaError_t mm_fp4_codes_map_create(const uint8_t *codes, uint64_t rows, uint64_t k, void **map);
/* GPU reference of the grouped GEMM with FP4 experts (codes [E][n][k / 2], exponents
 * [E][n][k / 32]), in double, as mm_launch_ref_gemm. */
cudaError_t mm_launch_ref_gemm_fp4(const uint8_t *qa, const float *sa, const int32_t *expert_of_row, int rows,
                                   const uint8_t *codes, const uint8_t *exps, int n, int k, double *out,
                                   cudaStream_t stream);
/* The tile height the next launches take: MM_GEMM_TILE_AUTO (0, the default), MM_GEMM_BM or
 * MM_WIDE_BM (gemm --tile; the wide form only where it can run). */
void mm_grouped_gemm_set_tile(int rows);
/* How the wide form's launches copy their scales: MM_WIDE_SCALES_AUTO (0, the default),
 * MM_WIDE_SCALES_GROUP or MM_WIDE_SCALES_BLOCK (gemm --wide-scales; gemm_schedule.h). */
void mm_grouped_gemm_set_wide_scales(int mode);
/* Whether a wide launch of these arguments copies each K block's scales (1) or 4 at a time (0). */
int mm_grouped_gemm_wide_block_scales(const mm_grouped_gemm_args *args);
/* The tile height a launch of these arguments takes (after mm_grouped_gemm_prepare). */
int mm_grouped_gemm_tile_rows(const mm_grouped_gemm_args *args, const int32_t *host_counts);
/* How many 2-CTA clusters (sharing A blocks) a launch with N columns and `ctas` CTAs runs; 0: one
 * CTA per tile (odd column-tile count, no room for pairs, or no expert with more than 64 rows).
 * After mm_grouped_gemm_prepare. */
int mm_grouped_gemm_pairs(int n, int ctas, int max_rows);
/* The SM cycles and nanoseconds the grouped GEMM's CTAs spent, summed over the launches since the
 * last reset (mm_clock_mhz turns them into the clock they ran at). */
cudaError_t mm_grouped_gemm_clock_reset(cudaStream_t stream);
cudaError_t mm_grouped_gemm_clock_read(cudaStream_t stream, unsigned long long *cycles, unsigned long long *ns);

/* The activation stage of ll and normal (act.cu): rows of the grouped layout through the GEMM's
 * schedule; meta holds one 16-byte record per row whose last float is the top-k weight. */
typedef struct {
    int experts, inter, has_limit, ue8m0;
    float limit;
    const int32_t *tile_start, *row_offset, *row_count;
    const void *meta;
    const float *gemm1_out;
    uint8_t *act;
    float *act_scales;
} mm_act_args;

cudaError_t mm_launch_swiglu_quant(mm_act_args args, int ctas, cudaStream_t stream);

/* The model's shape and numerics as every mode's kernels see them (set once at setup). */
typedef struct {
    int hidden, inter, experts, topk, max_tokens;
    int has_limit, ue8m0;
    float limit;
} mm_model_args;

/* One call: this rank's tokens in, its output out (device pointers). */
typedef struct {
    int tokens;
    const uint16_t *x;   /* [T][H] BF16 */
    const int32_t *ids;  /* [T][K] */
    const float *topk_w; /* [T][K] */
    uint16_t *y;         /* [T][H] BF16 */
    /* An EP slice (bench --ep-slice N, check's slice scenarios): the tokens a rank of that EP N
     * deployment has, and N (0 and 0 in a real run). The fused kernel takes the form such a rank
     * would (fused_schedule.h mm_fused_call_form): the slice's own tokens keep only their picks of its
     * experts, so tokens x topk would overstate its rows ~4.5x at EP8. */
    int slice_tokens, slice_ranks;
} mm_call_io;

/* This rank's local experts' weights, and their TMA descriptors. FP8: w1, w2 the weights, s1, s2
 * their block scales; FP4 (fp4 1): w1, w2 the E2M1 codes (the maps over them), e1, e2 the UE8M0
 * exponents, s1, s2 each weight block's word in the scales' layout (mm_launch_fp4_block_words;
 * docs/recipe.md "FP4 weights"). */
typedef struct {
    const uint8_t *w1, *w2;
    const float *s1, *s2;
    const void *w1_map, *w2_map;
    int fp4;
    const uint8_t *e1, *e2;
} mm_expert_args;

/* The expert FFN of ll and normal on rows in the GEMM core's grouped layout (contiguous: each
 * expert's segment at row_offset, row_count rows, padded to the tile height): GEMM1 to FP32, the
 * act stage, GEMM2 to BF16. The pipelines differ only in how the rows get there. */
typedef struct {
    uint8_t *packed_x;     /* [rows][H] FP8 */
    float *packed_scales;  /* [rows][H/128] */
    void *packed_meta;     /* [rows] mm_wire_meta-shaped {receive row, token, k, weight} */
    int32_t *row_offset, *row_count, *tile_start; /* [El], [El], [El + 1] */
    float *gemm1_out;      /* [rows][2I] */
    uint8_t *act;          /* [rows][I] FP8 */
    float *act_scales;     /* [rows][I/128] */
    uint16_t *gemm2_out;   /* [rows][H] BF16 */
    const void *x_map, *act_map; /* TMA maps over packed_x and act (mm_rows_map_create) */
    const void *out2_map;        /* over gemm2_out (mm_out_map_create) */
} mm_ffn_buffers;

/* In a launch sequence returning cudaError_t, with `cudaError_t e`, `cudaEvent_t *marks` and
 * `cudaStream_t stream` in scope: records marks[i] (--breakdown; nothing when marks is NULL). */
#define MM_MARK(i)                                                                                \
    do {                                                                                          \
        if (marks && (e = cudaEventRecord(marks[i], stream)) != cudaSuccess) return e;            \
    } while (0)

/* GEMM1, act, GEMM2 on `local_experts` experts; max_rows: as for mm_launch_grouped_gemm; marks:
 * NULL, or 2 events recorded after GEMM1 and after act (the caller marks GEMM2's end with what
 * follows it); comm: where the GEMMs report an expired pipeline wait. */
cudaError_t mm_launch_expert_ffn(const mm_model_args *m, const mm_expert_args *w, const mm_ffn_buffers *f,
                                 int local_experts, int max_rows, int sm_count, const mm_comm *comm, cudaEvent_t *marks,
                                 cudaStream_t stream);

/* Where a mode's exchange region (layout.h mm_layout_exchange_sym: ll and fused) sits in every
 * rank's symmetric buffer: its offset from the buffer's base, its parts' offsets within it, and
 * the dispatched row's size. */
typedef struct {
    uint64_t mode_offset, off_state, off_counts, off_flags, off_recv, off_combine;
    uint64_t off_meta;  /* fused only: dispatch_meta */
    uint64_t off_ready; /* fused only: dispatch_ready */
    uint64_t row_bytes; /* ll: mm_ll_row_bytes; fused: mm_fused_row_bytes */
} mm_exchange;

/* One call of the low-latency pipeline (ll.cu), all launches enqueued on `stream`. */
typedef struct {
    mm_comm comm;
    mm_exchange x; /* mm_layout_ll_sym */
    mm_model_args m;
    int sm_count;
    mm_call_io io;
    mm_ffn_buffers f; /* local workspace (mm_layout_ll_local): the masked layout, expert le at le * R * T */
    mm_expert_args w;
} mm_ll_args;

/* marks: NULL, or MM_LL_MARKS events recorded around the launches (--breakdown) */
#define MM_LL_MARKS 8
cudaError_t mm_launch_ll(mm_ll_args args, cudaEvent_t *marks, cudaStream_t stream);

/* The normal (high-throughput) pipeline (normal.cu): a launch per stage, one host sync. */
typedef struct {
    mm_comm comm;
    /* byte offsets of the regions in every rank's symmetric buffer (mode offset included) */
    uint64_t off_counts, off_recv, off_combine;
    uint64_t row_bytes; /* mm_normal_row_bytes */
    mm_model_args m;
    int sm_count;
    int comm_ctas; /* grid cap of the communication kernels: 4 CTAs of 128 threads per SM given */
    mm_call_io io;
    int recv_rows; /* rows this rank received: known on the host after the count exchange */
    /* local workspace (mm_layout_normal_local) */
    uint8_t *xq;
    float *xq_scales;
    int32_t *token_slot;   /* [T][R] */
    int32_t *send_count;   /* [R], then expert_count [E], fill [El], done [2] (zeroed each call) */
    int32_t *expert_count;
    int32_t *fill;
    uint32_t *done;        /* CTAs finished: [0] dispatch, [1] reduce-send (last one runs the barrier) */
    int32_t *send_offset;  /* [R] */
    int32_t *recv_base;    /* [R + 1] */
    int32_t *perm_index;   /* [R*T][K] */
    int32_t *host_totals;  /* host-mapped: [0] rows received, [1] padded expert rows */
    mm_ffn_buffers f;      /* the contiguous layout, segments padded to the tile height */
    mm_expert_args w;
} mm_normal_args;

/* The stages before the CPU sync (quantize, layout, notify, barrier, offsets, then dispatch, which
 * needs no host-read count; offsets_done recorded after offsets), and the ones after it (permute
 * ... combine, a.recv_rows set). marks: NULL or MM_NORMAL_MARKS events. */
#define MM_NORMAL_MARKS 10
cudaError_t mm_launch_normal_front(mm_normal_args a, cudaEvent_t *marks, cudaEvent_t offsets_done, cudaStream_t stream);
cudaError_t mm_launch_normal_rest(mm_normal_args a, cudaEvent_t *marks, cudaStream_t stream);

/* The fused mega-MoE kernel (fused.cu): one persistent launch per call. */
typedef struct {
    mm_comm comm;
    mm_exchange x; /* mm_layout_fused_sym */
    mm_model_args m;
    mm_call_io io;
    /* local workspace (mm_layout_fused_local) */
    uint8_t *act;
    float *act_scales;
    mm_expert_args w;
    const void *act_map; /* TMA map over act (mm_rows_map_create) */
    /* --breakdown: NULL, or [ctas][mm_fused_stamps_per_cta()] globaltimer stamps per CTA: start, dispatch
     * sent, counts in, GEMM1 items done (the math warps' last GEMM1 epilogue), GEMM2 items done,
     * combine done */
    unsigned long long *stamps;
} mm_fused_args;
#define MM_FUSED_PHASE_STAMPS 6
#define MM_FUSED_COUNT_STAMPS 11 /* the phases, then the counts hand-off's steps */
/* the first MM_FUSED_TRACE_ITEMS GEMM items of each CTA: {item, claimed, rows ready (a GEMM2
 * item's gemm1_done seen), loads issued, math took it, epilogue done} */
#define MM_FUSED_TRACE_ITEMS 16
#define MM_FUSED_ITEM_FIELDS 6
#define MM_FUSED_TRACE_STAMPS (MM_FUSED_COUNT_STAMPS + MM_FUSED_TRACE_ITEMS * MM_FUSED_ITEM_FIELDS)
/* Stamps per CTA as the kernel was built: MM_FUSED_PHASE_STAMPS, or in a diagnostic build
 * (nvcc -DMM_FUSED_TRACE, `make trace`) MM_FUSED_TRACE_STAMPS: the counts hand-off's steps and
 * the items' times too. */
int mm_fused_stamps_per_cta(void);

/* Dynamic shared memory of the fused kernel for a shape; raises the kernel's limit and returns
 * how many CTAs can be resident at once (all must be: the kernel waits across CTAs). */
size_t mm_fused_smem_bytes(int hidden, int experts, int ranks);
cudaError_t mm_fused_prepare(int hidden, int experts, int ranks, int *max_ctas);
/* The most dynamic shared memory a fused launch can take on the current GPU. */
cudaError_t mm_fused_smem_room(size_t *room);
cudaError_t mm_launch_fused(mm_fused_args args, int ctas, cudaStream_t stream);

/* NaN pattern over an output, so an unwritten element fails every check. */
cudaError_t mm_launch_poison(void *ptr, uint64_t bytes, cudaStream_t stream);
/* The L2 flush before a timed call, over a buffer of mm_l2_flush_bytes(L2 size): a write of
 * every byte (`iteration` as the value; --l2-flush on), or with `clean` a read through L2 that
 * leaves it holding clean lines (--l2-flush clean). */
cudaError_t mm_launch_l2_flush(void *buf, uint64_t bytes, int clean, int iteration, cudaStream_t stream);
/* One read of [ptr, ptr + bytes) (a multiple of 16), each word once: timed, the HBM ceiling.
 * `sink`: a device word the kernel may write (so its loads are not dead). */
cudaError_t mm_launch_hbm_read(const void *ptr, uint64_t bytes, uint32_t *sink, cudaStream_t stream);
/* Finite FP8 e4m3 bytes over [ptr, ptr + bytes) (a multiple of 4): the operands of a timed GEMM. */
cudaError_t mm_launch_fill_fp8(void *ptr, uint64_t bytes, uint32_t seed, cudaStream_t stream);
/* This rank's stores of `bytes_per_peer` into every peer's window at offset + rank * bytes_per_peer
 * (`ctas` CTAs dealt over the peers; at least 2 ranks): timed, the NVLink write ceiling. */
cudaError_t mm_launch_nvlink_write(mm_comm comm, uint64_t offset, uint64_t bytes_per_peer, int ctas,
                                   cudaStream_t stream);
/* One thread sleeping `ns` by the global timer: the GPU idles (bench --idle-ms) in stream order. */
cudaError_t mm_launch_idle(uint64_t ns, cudaStream_t stream);
static inline uint64_t mm_l2_flush_bytes(uint64_t l2_bytes)
{
    return l2_bytes * 5 / 2 / 16 * 16; /* 2.5x the L2, whole 16-byte words */
}

#ifdef __cplusplus
}
#endif

#endif
