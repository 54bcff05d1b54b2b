/* Layout math of the normal (high-throughput) pipeline, host- and device-callable so the CPU
 * tests cover what the kernels will compute (issue: normal baseline).
 *
 * Stage 2 (layout): which ranks each token goes to, once per rank however many of its experts
 * live there, and how its top-k ids look from that rank (local expert ids, -1 elsewhere).
 * Stage 3 (notify): with counts[s][r] = rows sender s sends to receiver r, sender s writes its
 * rows at receiver r from offset sum_{s' < s} counts[s'][r]: fixed regions, direct addressing.
 * Stage 5 (permute): each local expert's rows padded to the GEMM tile height. */
#ifndef MEGAMOE_NORMAL_LAYOUT_H
#define MEGAMOE_NORMAL_LAYOUT_H

#include <stdint.h>

#include "recipe.h" /* MM_HD */

/* Bit r set when one of the token's experts lives on rank r (ranks <= 32). */
MM_HD uint32_t mm_token_rank_mask(const int32_t *ids, int topk, int experts_per_rank)
{
    uint32_t mask = 0;
    for (int k = 0; k < topk; k++)
        if (ids[k] >= 0) mask |= 1u << (ids[k] / experts_per_rank);
    return mask;
}

/* One routing slot as rank `rank` sees it: the local expert id, or -1 where another rank owns the
 * expert (or the slot is empty). */
MM_HD int32_t mm_local_id(int32_t id, int experts_per_rank, int rank)
{
    return id >= 0 && id / experts_per_rank == rank ? id - rank * experts_per_rank : -1;
}

/* The token's ids as rank `rank` sees them (mm_local_id per slot). Returns how many are local. */
MM_HD int mm_token_local_ids(const int32_t *ids, int topk, int experts_per_rank, int rank,
                             int32_t *local)
{
    int n = 0;
    for (int k = 0; k < topk; k++) {
        local[k] = mm_local_id(ids[k], experts_per_rank, rank);
        n += local[k] >= 0;
    }
    return n;
}

/* Where sender's rows start in receiver's region: counts is [ranks][ranks], sender-major. */
MM_HD int mm_recv_offset(const int32_t *counts, int ranks, int sender, int receiver)
{
    int off = 0;
    for (int s = 0; s < sender; s++) off += counts[s * ranks + receiver];
    return off;
}

MM_HD int mm_recv_total(const int32_t *counts, int ranks, int receiver)
{
    return mm_recv_offset(counts, ranks, ranks, receiver);
}

#endif
