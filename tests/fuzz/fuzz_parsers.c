/* libFuzzer target for the parsers that read user input: the model config (JSON) and the batch
 * list, mode list and routing spec flags. Any crash, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sweep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    mm_config cfg;
    config_parse((const char *)data, size, "fuzz.json", &cfg, err, sizeof err);

    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int batches[MM_MAX_BATCHES], n = 0;
    parse_batch_list(text, 0, batches, MM_MAX_BATCHES, &n, err, sizeof err);
    unsigned modes;
    parse_mode_list(text, &modes, err, sizeof err);
    mm_routing r;
    parse_routing(text, &r, err, sizeof err);
    free(text);
    return 0;
}
