#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include "gemm_schedule.h"
int main(void){
  enum { PE = 48, COLS = 48, PAIRS = 66 };
  static int32_t pro[PE], pstart[PE + 1];
  for (int e = 0; e < PE; e++) pro[e] = 1024;
  const int prow = mm_tile_prefix_bm(pro, PE, MM_WIDE_BM, pstart);
  const int ppairs = prow * COLS / 2;
  for (int mode = 0; mode < 2; mode++) for (int rot = 0; rot < 2; rot++) {
    double load[PAIRS] = {0}, sum = 0, hi = 0, lo = 1e9; int nw2[PAIRS]={0};
    for (int c = 0; c < PAIRS; c++) {
      for (int n = 0; n * PAIRS < ppairs; n++) {
        const int p = mm_pair_walk_item(c, n, PAIRS, rot);
        if (p >= ppairs) continue;
        const mm_tile t = mm_tile_locate_banded(pstart, PE, COLS, MM_GEMM_BAND, 2 * p);
        const int rows = pro[t.expert] - t.row_tile * MM_WIDE_BM;
        if (rows > 64) load[c] += 1.0;
        else if (!mode) load[c] += 0.7, nw2[c]++;
        else if (mm_wide2_first_col(t.col_tile, 0) >= 0) load[c] += 1.2, nw2[c]++;
      }
      sum += load[c]; hi = load[c] > hi ? load[c] : hi; lo = load[c] < lo ? load[c] : lo;
    }
    int mn=999,mx=0; for(int c=0;c<PAIRS;c++){mn=nw2[c]<mn?nw2[c]:mn; mx=nw2[c]>mx?nw2[c]:mx;}
    printf("mode %d rot %d: mean %.2f lo %.2f hi %.2f narrow items/pair %d..%d\n", mode, rot, sum/PAIRS, lo, hi, mn, mx);
  }
}
