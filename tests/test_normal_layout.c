/* Normal pipeline layout math against values worked out by hand, and its invariants on generated
 * routing: every (token, k) lands on exactly one rank, region offsets tile without overlap. */
#include <string.h>

#include "../kernels/gemm_schedule.h"
#include "../kernels/normal_layout.h"
#include "datagen_host.h"
#include "test_util.h"

static void by_hand(void **state)
{
    (void)state;
    /* 8 experts over 4 ranks (2 each): token picks experts 1, 2, 3 -> ranks 0, 1, 1 */
    const int32_t ids[3] = {1, 2, 3};
    assert_int_equal(mm_token_rank_mask(ids, 3, 2), 0x3u);
    int32_t local[3];
    assert_int_equal(mm_token_local_ids(ids, 3, 2, 1, local), 2);
    assert_int_equal(local[0], -1);
    assert_int_equal(local[1], 0);
    assert_int_equal(local[2], 1);
    const int32_t masked[2] = {-1, 7};
    assert_int_equal(mm_token_rank_mask(masked, 2, 2), 0x8u);
    /* one slot as each rank sees it (the dispatch kernel's rule): empty slots are -1 everywhere */
    assert_int_equal(mm_local_id(7, 2, 3), 1);
    assert_int_equal(mm_local_id(7, 2, 2), -1);
    assert_int_equal(mm_local_id(-1, 2, 0), -1);
    assert_int_equal(mm_local_id(0, 2, 0), 0);
    /* counts[s][r], 3 ranks: receiver 2 gets 4 from rank 0, 0 from rank 1, 5 from rank 2 */
    const int32_t counts[9] = {1, 2, 4, 3, 3, 0, 2, 6, 5};
    assert_int_equal(mm_recv_offset(counts, 3, 0, 2), 0);
    assert_int_equal(mm_recv_offset(counts, 3, 1, 2), 4);
    assert_int_equal(mm_recv_offset(counts, 3, 2, 2), 4);
    assert_int_equal(mm_recv_total(counts, 3, 2), 9);
    assert_int_equal(mm_recv_total(counts, 3, 1), 11);
    /* the offsets kernel's segments: each expert's rows padded to 128, starting at its first row
     * tile (tile_start x 128): 0 rows -> 0, 1 -> 128, 128 -> 128, 129 -> 256 */
    const int32_t rows[4] = {0, 1, 128, 129};
    int32_t start[5];
    assert_int_equal(mm_tile_prefix(rows, 4, start) * MM_GEMM_BM, 512);
    assert_int_equal(start[1] * MM_GEMM_BM, 0);
    assert_int_equal(start[2] * MM_GEMM_BM, 128);
    assert_int_equal(start[3] * MM_GEMM_BM, 256);
}

static void invariants_on_routing(void **state)
{
    (void)state;
    enum { RANKS = 4, TOKENS = 300, TOPK = 6, EXPERTS = 32 };
    const int el = EXPERTS / RANKS;
    mm_config c;
    memset(&c, 0, sizeof c);
    c.hidden = 128;
    c.inter = 128;
    c.experts = EXPERTS;
    c.topk = TOPK;
    c.routed_scaling_factor = 1.0;
    mm_routing r = {ROUTE_MASKED, 0.2};
    mm_route_tables t;
    assert_int_equal(route_tables_make(&r, EXPERTS, 3, &t), MM_OK);
    mm_route_params p = route_params(&r, &c, RANKS, 3, t.zipf_cdf, t.zipf_mult, t.softplus);
    static int32_t ids[RANKS][TOKENS * TOPK];
    static float w[TOKENS * TOPK];
    int32_t counts[RANKS * RANKS] = {0};
    for (int s = 0; s < RANKS; s++) {
        host_gen_routing(&p, (uint64_t)s * TOKENS, TOKENS, ids[s], w);
        for (int tok = 0; tok < TOKENS; tok++) {
            const int32_t *tid = ids[s] + tok * TOPK;
            uint32_t mask = mm_token_rank_mask(tid, TOPK, el);
            int seen = 0, valid = 0;
            for (int k = 0; k < TOPK; k++) valid += tid[k] >= 0;
            for (int dst = 0; dst < RANKS; dst++) {
                int32_t local[TOPK];
                int n = mm_token_local_ids(tid, TOPK, el, dst, local);
                assert_int_equal(n > 0, (mask >> dst) & 1u);
                seen += n;
                counts[s * RANKS + dst] += n > 0; /* one row per (token, rank) */
            }
            assert_int_equal(seen, valid); /* every valid slot is local to exactly one rank */
        }
    }
    for (int dst = 0; dst < RANKS; dst++) {
        int end = 0;
        for (int s = 0; s < RANKS; s++) {
            assert_int_equal(mm_recv_offset(counts, RANKS, s, dst), end); /* back to back */
            end += counts[s * RANKS + dst];
        }
        assert_int_equal(mm_recv_total(counts, RANKS, dst), end);
    }
    route_tables_free(&t);
}

int run_normal_layout_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_hand),
        cmocka_unit_test(invariants_on_routing),
    };
    return cmocka_run_group_tests_name("normal_layout", tests, NULL, NULL);
}
