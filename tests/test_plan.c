/* Plan figures against values worked out by hand for deepseek-v4-flash (H 4096, I 2048, E 256,
 * top-6): one expert = 3*4096*2048 FP8 bytes + 3*32*16 FP32 block scales = 25,171,968 bytes. */
#include <math.h>

#include "plan.h"
#include "test_util.h"

static const mm_ceilings H200 = {3900.0, 370.0, 1325.0};

static void near(double got, double want, double rel)
{
    if (fabs(got - want) > rel * fabs(want)) fail_msg("got %.6g, want %.6g", got, want);
}

static mm_config flash(void)
{
    mm_config c;
    assert_int_equal(config_load("configs/deepseek-v4-flash.json", &c), MM_OK);
    return c;
}

static void flash_ep8(void **state)
{
    (void)state;
    mm_config c = flash();
    mm_floor f;
    assert_true(plan_expert_weight_bytes(&c) == 25171968.0);
    /* batch 1: 8 tokens in the layer; an expert idles with (250/256)^8 = 0.82718,
     * 32 * 0.17282 = 5.530 active -> 139.2 MB -> 35.69 us at 3.9 TB/s */
    plan_floor(&c, 8, 1, &H200, &f);
    near(f.active_experts, 5.5302, 1e-4);
    near(f.weight_bytes, 139.2065e6, 1e-5);
    near(f.floor_us, 35.694, 1e-4);
    assert_int_equal(f.bound, BOUND_HBM);
    /* batch 64: all 32 experts (idle probability 1e-5): 805.5 MB -> 206.54 us */
    plan_floor(&c, 8, 64, &H200, &f);
    near(f.active_experts, 32.0, 1e-5);
    near(f.floor_us, 206.54, 1e-4);
    assert_int_equal(f.bound, BOUND_HBM);
    /* batch 8192: 49152 pairs * 6 * 4096 * 2048 = 2.4739 TFLOP -> 1867.1 us at 1325 TFLOP/s;
     * 7/8 of pairs remote * (4096 + 128 + 16 + 8192) bytes = 534.68 MB over NVLink */
    plan_floor(&c, 8, 8192, &H200, &f);
    near(f.flops, 2473901162496.0, 1e-12);
    near(f.floor_us, 1867.095, 1e-5);
    near(f.nvlink_bytes, 534675456.0, 1e-12);
    assert_int_equal(f.bound, BOUND_TC);
}

/* --ep-slice: one EP8 rank's weights and FLOPs, no NVLink bytes; the bound follows. A Pro EP2
 * rank at 4096 tokens is NVLink-free but HBM-bound either way. */
static void slice_floor(void **state)
{
    (void)state;
    mm_config c = flash();
    mm_floor real, slice;
    plan_floor(&c, 8, 8192, &H200, &real);
    plan_rank_floor(&c, 8, 8192, 1, &H200, &slice);
    near(slice.flops, real.flops, 1e-15);
    near(slice.weight_bytes, real.weight_bytes, 1e-15);
    assert_true(slice.nvlink_bytes == 0.0 && slice.t_nvlink_us == 0.0);
    near(slice.floor_us, 1867.095, 1e-5);
    assert_int_equal(slice.bound, BOUND_TC);
    /* a tiny NVLink ceiling makes the real rank NVLink-bound; the slice stays at its tc floor */
    mm_ceilings slow_link = H200;
    slow_link.nvlink_gbps = 1.0;
    plan_floor(&c, 8, 64, &slow_link, &real);
    plan_rank_floor(&c, 8, 64, 1, &slow_link, &slice);
    assert_int_equal(real.bound, BOUND_NVLINK);
    assert_int_equal(slice.bound, BOUND_HBM);
    near(slice.floor_us, 206.54, 1e-4);
}

/* FP4 experts: 1.5 H I bytes of E2M1 codes, 3 H I / 32 of exponents and a 4-byte word per 128 x
 * 128 block (where FP8 has its scale), 0.531x FP8's bytes; the HBM floor streams them. */
static void fp4_bytes(void **state)
{
    (void)state;
    mm_config c = flash(), f4 = flash();
    f4.weights = MM_WEIGHTS_FP4;
    near(plan_expert_weight_bytes(&f4), 3.0 * 4096 * 2048 * (0.5 + 1.0 / 32.0) + 3.0 * 32 * 16 * 4, 1e-15);
    const double ratio = plan_expert_weight_bytes(&f4) / plan_expert_weight_bytes(&c);
    assert_true(ratio > 0.530 && ratio < 0.532);
    mm_floor a, b;
    plan_floor(&c, 8, 64, &H200, &a);
    plan_floor(&f4, 8, 64, &H200, &b);
    near(b.t_hbm_us, a.t_hbm_us * ratio, 1e-12);
    near(b.flops, a.flops, 1e-15);
}

static void flash_ep2(void **state)
{
    (void)state;
    mm_config c = flash();
    mm_floor f;
    /* batch 1: 128 * (1 - (250/256)^2) = 5.9297 experts -> 38.27 us */
    plan_floor(&c, 2, 1, &H200, &f);
    near(f.active_experts, 5.9296875, 1e-9);
    near(f.floor_us, 38.272, 1e-4);
    /* batch 512: all 128 experts, 3.222 GB -> 826.16 us */
    plan_floor(&c, 2, 512, &H200, &f);
    near(f.floor_us, 826.157, 1e-5);
    assert_int_equal(f.bound, BOUND_HBM);
    /* batch 4096: 1.23695 TFLOP -> 933.55 us (tc); half the pairs remote: 152.76 MB, 412.9 us */
    plan_floor(&c, 2, 4096, &H200, &f);
    near(f.floor_us, 933.548, 1e-5);
    assert_int_equal(f.bound, BOUND_TC);
    near(f.t_nvlink_us, 412.877, 1e-5);
    /* fused's item form: 4096 tokens -> 24576 pairs over 128 experts = 192 rows, tiles of 128 + 64:
     * 96 rows a tile on average, dual items */
    mm_fused_form form = plan_fused_form(&f);
    near(form.rows_per_tile, 96.0, 1e-12);
    assert_true(form.dual);
    plan_floor(&c, 2, 2048, &H200, &f); /* 96 rows, one tile */
    form = plan_fused_form(&f);
    near(form.rows_per_tile, 96.0, 1e-12);
    assert_true(form.dual);
    plan_floor(&c, 2, 1024, &H200, &f); /* 48 rows: passes */
    form = plan_fused_form(&f);
    near(form.rows_per_tile, 48.0, 1e-12);
    assert_false(form.dual);
    plan_floor(&c, 2, 1, &H200, &f); /* 6 pairs over 5.93 experts: 1 row a tile */
    form = plan_fused_form(&f);
    near(form.rows_per_tile, 1.0, 1e-12);
    assert_false(form.dual);
    plan_floor(&c, 2, 0, &H200, &f); /* no tokens: no tiles */
    form = plan_fused_form(&f);
    assert_true(form.rows_per_tile == 0.0 && !form.dual);
    /* plan's fused column: the items and the kernel's form (Flash-like: 256 experts, top-6, 2048
     * intermediate, EP8; an EP8 slice prints that rank's form) */
    mm_config fl4 = c;
    fl4.experts = 256;
    fl4.topk = 6;
    char label[32];
    mm_fused_form items = {1.0, 0};
    fl4.inter = 2048;
    fl4.weights = MM_WEIGHTS_FP8;
    plan_fused_label(&fl4, 8, 1, &items, label, sizeof label);
    assert_string_equal(label, "pass+handoff");
    plan_fused_label(&fl4, 8, 160, &items, label, sizeof label);
    assert_string_equal(label, "pass");
    items.dual = 1;
    plan_fused_label(&fl4, 8, 680, &items, label, sizeof label);
    assert_string_equal(label, "dual+fold");
    plan_fused_label(&fl4, 8, 4096, &items, label, sizeof label);
    assert_string_equal(label, "dual");
    fl4.weights = MM_WEIGHTS_FP4; /* the swapped form up to 298 tokens a rank, not at 299 or 0 */
    plan_fused_label(&fl4, 8, 160, &items, label, sizeof label);
    assert_string_equal(label, "swap");
    plan_fused_label(&fl4, 8, 298, &items, label, sizeof label);
    assert_string_equal(label, "swap");
    plan_fused_label(&fl4, 8, 299, &items, label, sizeof label);
    assert_string_not_equal(label, "swap");
    plan_fused_label(&fl4, 8, 0, &items, label, sizeof label);
    assert_string_not_equal(label, "swap");
    plan_fused_label(&fl4, 8, 680, &items, label, sizeof label);
    assert_string_equal(label, "dual");
    /* EP1: nothing crosses NVLink */
    plan_floor(&c, 1, 4096, &H200, &f);
    assert_true(f.nvlink_bytes == 0.0);
}

static void ceilings_override(void **state)
{
    (void)state;
    mm_config c = flash();
    mm_ceilings slow_hbm = {1950.0, 370.0, 1325.0};
    mm_floor a, b;
    plan_floor(&c, 8, 64, &H200, &a);
    plan_floor(&c, 8, 64, &slow_hbm, &b);
    near(b.floor_us, 2 * a.floor_us, 1e-12);
}

static void layouts(void **state)
{
    (void)state;
    mm_config c = flash();
    mm_shape s = plan_shape(&c, 2, 1024);
    /* pair capacity: 2 ranks * 1024 tokens * min(6, 128) + 128 * 127 padding */
    assert_int_equal(mm_pair_capacity(&s), 2 * 1024 * 6 + 128 * 127);
    mm_layout l = mm_layout_ll_sym(&s);
    for (int i = 0; i < l.count; i++) {
        assert_int_equal(l.region[i].offset % MM_LAYOUT_ALIGN, 0);
        if (i) assert_true(l.region[i].offset >= l.region[i - 1].offset + l.region[i - 1].bytes);
    }
    /* ll receive region: [128][2][1024] rows of 4096 + 128 + 16 bytes */
    assert_true(l.region[XCHG_DISPATCH_RECV].bytes == 128ull * 2 * 1024 * (4096 + 128 + 16));
    assert_true(l.region[XCHG_COUNTS].bytes == 128ull * 2 * 8);
    mm_layout loc = mm_layout_ll_local(&s);
    assert_true(loc.region[LL_GEMM1_OUT].bytes == 128ull * 2 * 1024 * 4096 * 4);
    assert_int_equal(l.count, XCHG_DISPATCH_META); /* ll has no meta region */
    /* fused: a row per (sender, token) of 4096 + 128 bytes, a 16-byte meta per (expert, sender,
     * token), the rest as ll's */
    mm_layout f = mm_layout_fused_sym(&s);
    assert_int_equal(f.count, XCHG_DISPATCH_READY + 1);
    assert_true(f.region[XCHG_DISPATCH_RECV].bytes == 2ull * 1024 * (4096 + 128));
    assert_true(f.region[XCHG_DISPATCH_META].bytes == 128ull * 2 * 1024 * 16);
    assert_true(f.region[XCHG_DISPATCH_READY].bytes == 128ull * 2 * 1024 * 4);
    assert_true(f.region[XCHG_COMBINE_RECV].bytes == l.region[XCHG_COMBINE_RECV].bytes);
    assert_true(f.region[XCHG_COUNTS].bytes == l.region[XCHG_COUNTS].bytes);
    for (int i = 1; i < f.count; i++) assert_true(f.region[i].offset >= f.region[i - 1].offset + f.region[i - 1].bytes);
    /* fused's act is compact: 8 extra rows per local expert, then a 128-row block per possible
     * row tile, here min(128 experts x 16 tiles, 2 * 1024 * 6 / 128 + 128) = 224 tiles */
    assert_int_equal((int)mm_fused_max_row_tiles(&s), 224);
    mm_layout fl = mm_layout_fused_local(&s);
    assert_true(fl.region[FUSED_ACT].bytes == (128ull * 8 + 224ull * 128) * 2048);
    assert_true(fl.region[FUSED_ACT_SCALES].bytes == (128ull * 8 + 224ull * 128) * (2048 / 128) * 4);
    uint64_t sym, local;
    plan_mode_bytes(MODE_FUSED, &s, &sym, &local);
    assert_true(sym == f.total && local == fl.total);
    /* normal's wire row: 4096 FP8 + 32 scales (128 B) + header of 6 ids, 6 weights, a token
     * index (52 B, padded to 64) */
    assert_int_equal((int)mm_normal_row_bytes(&s), 4096 + 128 + 64);
    mm_layout n = mm_layout_normal_sym(&s);
    assert_true(n.region[NORMAL_COUNTS].bytes == 2ull * (1 + 128) * 4);
    assert_true(n.region[NORMAL_DISPATCH_RECV].bytes == 2ull * 1024 * (4096 + 128 + 64));
    assert_true(n.region[NORMAL_COMBINE_RECV].bytes == 2ull * 1024 * 4096 * 2);
    mm_layout nl = mm_layout_normal_local(&s);
    for (int i = 0; i < nl.count; i++) assert_int_equal(nl.region[i].offset % MM_LAYOUT_ALIGN, 0);
    /* counters: send [2] + experts [256] + fill [128] + done [2] + send offsets [2] + receive bases [3] */
    assert_true(nl.region[NORMAL_COUNTERS].bytes == (2ull + 256 + 128 + 2 + 2 + 3) * 4);
}

/* The fused kernel's row-tile bound against brute force: random routings of T tokens per rank
 * over El local experts (each token at most once per expert, K picks) never need more tiles,
 * and the bound is reached by its worst cases. */
static void fused_row_tiles(void **state)
{
    (void)state;
    const int shapes[][4] = {{2, 1, 6, 128}, {2, 64, 6, 128}, {1, 100, 2, 4}, {4, 300, 8, 16}, {2, 8192, 6, 128}};
    uint64_t rng = 12345;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int ranks = shapes[si][0], t = shapes[si][1], k = shapes[si][2], el = shapes[si][3];
        mm_shape s = {4096, 2048, (int64_t)el * ranks, k, ranks, t};
        int64_t bound = mm_fused_max_row_tiles(&s);
        static int count[4096];
        for (int trial = 0; trial < 50; trial++) {
            for (int e = 0; e < el; e++) count[e] = 0;
            for (int tok = 0; tok < ranks * t; tok++) {
                int picks = k < el ? k : el, first = (int)((rng = rng * 6364136223846793005ull + 1) >> 33) % el;
                /* trial 0: the same experts for every token (fewest tiles); others spread */
                for (int p = 0; p < picks; p++) count[(trial ? first + p : p) % el]++;
            }
            int64_t tiles = 0;
            for (int e = 0; e < el; e++) tiles += (count[e] + MM_FUSED_TILE_ROWS - 1) / MM_FUSED_TILE_ROWS;
            assert_true(tiles <= bound);
        }
    }
    /* worst cases by hand: 1 token per rank, 2 ranks, top-6 of 128: 12 experts with 1 row each */
    mm_shape one = {4096, 2048, 256, 6, 2, 1};
    assert_true(mm_fused_max_row_tiles(&one) >= 12);
    /* every expert full: 2 ranks * one tile of tokens, 6 of 6 experts -> 6 experts * 2 tiles */
    mm_shape full = {4096, 2048, 12, 6, 2, MM_FUSED_TILE_ROWS};
    assert_int_equal(mm_fused_max_row_tiles(&full), 12);
}

/* bench's own routing (uniform, seed 1): the slowest rank's active experts. Flash at EP2, 1 token
 * per rank: rank 0's token picks 2 of its experts and rank 1's token 5 more (a trace of the
 * fused kernel: 7 experts, 112 GEMM1 items), 176.2 MB = 45.2 us; 0 tokens: none; 4096 tokens:
 * every expert. Another seed draws other experts. */
static void seed_floor(void **state)
{
    (void)state;
    mm_config c = flash();
    mm_routing r;
    char err[128];
    assert_int_equal(parse_routing("uniform", &r, err, sizeof err), MM_OK);
    mm_seed_floor sf;
    assert_int_equal(plan_seed_floor(&c, &r, 1, 2, 1, &H200, &sf), MM_OK);
    assert_int_equal(sf.active, 7);
    assert_int_equal(sf.rank, 0);
    near(sf.weight_bytes, 7 * 25171968.0, 1e-12);
    near(sf.t_hbm_us, 7 * 25171968.0 / 3900e9 * 1e6, 1e-9);
    /* one row per expert: a tile each, 128 times the rows' tiles */
    assert_int_equal(sf.tiles, 7);
    assert_int_equal(sf.tiles_rank, 0);
    assert_int_equal(sf.tiles_rows, 7);
    near(plan_tile_excess(&sf), 128.0, 1e-12);
    assert_int_equal(plan_seed_floor(&c, &r, 1, 2, 0, &H200, &sf), MM_OK);
    assert_int_equal(sf.active, 0);
    assert_true(sf.t_hbm_us == 0.0);
    assert_int_equal(sf.tiles, 0);
    assert_true(plan_tile_excess(&sf) == 0.0);
    assert_int_equal(plan_seed_floor(&c, &r, 1, 2, 4096, &H200, &sf), MM_OK);
    assert_int_equal(sf.active, 128);
    /* ~190 rows an expert: every one of rank 0's 128 experts needs a second, partly empty tile
     * (24380 rows, 190.5 tiles' worth: +34%); the other rank has as many tiles, the first wins */
    assert_int_equal(sf.tiles, 256);
    assert_int_equal(sf.tiles_rank, 0);
    assert_int_equal(sf.tiles_rows, 24380);
    near(plan_tile_excess(&sf), 256.0 * 128.0 / 24380.0, 1e-12);
    /* the same routing's rows per expert, rank by rank (gemm --spread routing): rank 0's 128
     * experts hold its 24380 rows in 256 tiles, rank 1's its 24772 */
    int32_t rows[128];
    long total = 0, tiles = 0;
    assert_int_equal(plan_rank_rows(&c, &r, 1, 2, 4096, 0, rows), MM_OK);
    for (int e = 0; e < 128; e++) {
        total += rows[e];
        tiles += (rows[e] + 127) / 128;
    }
    assert_int_equal(total, 24380);
    assert_int_equal(tiles, 256);
    assert_int_equal(plan_rank_rows(&c, &r, 1, 2, 4096, 1, rows), MM_OK);
    total = 0;
    for (int e = 0; e < 128; e++) total += rows[e];
    assert_int_equal(total, 24772);
    assert_int_equal(plan_rank_rows(&c, &r, 1, 2, 0, 0, rows), MM_OK);
    for (int e = 0; e < 128; e++) assert_int_equal(rows[e], 0);
    /* masked:1 masks every slot: no expert gets a row (gemm --spread routing then has none) */
    mm_routing masked;
    assert_int_equal(parse_routing("masked:1", &masked, err, sizeof err), MM_OK);
    for (int rank = 0; rank < 2; rank++) {
        assert_int_equal(plan_rank_rows(&c, &masked, 1, 2, 64, rank, rows), MM_OK);
        for (int e = 0; e < 128; e++) assert_int_equal(rows[e], 0);
    }
    /* 8192 tokens: ~384 rows an expert, rank 1 has the most tiles (457 for 49411 rows: +18%; the
     * folding form is not launched this far from 128 rows an expert) */
    assert_int_equal(plan_seed_floor(&c, &r, 1, 2, 8192, &H200, &sf), MM_OK);
    assert_int_equal(sf.tiles, 457);
    assert_int_equal(sf.tiles_rank, 1);
    assert_int_equal(sf.tiles_rows, 49411);
    /* other seeds: each token's top-6 are distinct, so the two tokens touch 6 to 12 experts and
     * the busier rank at least 3 of them */
    for (uint64_t seed = 2; seed < 8; seed++) {
        assert_int_equal(plan_seed_floor(&c, &r, seed, 2, 1, &H200, &sf), MM_OK);
        assert_true(sf.active >= 3 && sf.active <= 12);
    }
    /* the routing's floor: at 1 token the busiest rank's weights (7 experts: 45.2 us against the
     * expected 38.3); at 4096 tokens every expert is touched and the tensor cores bound it, as
     * expected; never below the expected floor's other terms */
    mm_floor fl;
    plan_floor(&c, 2, 1, &H200, &fl);
    assert_int_equal(plan_seed_floor(&c, &r, 1, 2, 1, &H200, &sf), MM_OK);
    near(plan_routing_floor_us(&fl, &sf), 7 * 25171968.0 / 3900e9 * 1e6, 1e-9);
    assert_true(plan_routing_floor_us(&fl, &sf) > fl.floor_us);
    plan_floor(&c, 2, 4096, &H200, &fl);
    assert_int_equal(plan_seed_floor(&c, &r, 1, 2, 4096, &H200, &sf), MM_OK);
    near(plan_routing_floor_us(&fl, &sf), fl.floor_us, 1e-9);
    mm_seed_floor none = {0};
    plan_floor(&c, 2, 8, &H200, &fl);
    near(plan_routing_floor_us(&fl, &none), fl.t_tc_us > fl.t_nvlink_us ? fl.t_tc_us : fl.t_nvlink_us, 1e-12);
}

int run_plan_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flash_ep8),
        cmocka_unit_test(flash_ep2),
        cmocka_unit_test(slice_floor),
        cmocka_unit_test(fp4_bytes),
        cmocka_unit_test(ceilings_override),
        cmocka_unit_test(layouts),
        cmocka_unit_test(fused_row_tiles),
        cmocka_unit_test(seed_floor),
    };
    return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
