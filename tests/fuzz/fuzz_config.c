/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The config loader on any text: it must answer 0 or -1, and on 0 hand back
 * a config whose values are in their documented ranges; either way
 * ncd_config_free() releases everything (LeakSanitizer checks).
 */
#include <string.h>

#include "core/config.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ncd_config cfg;
	char *text;
	int r;

	if (size > 1 << 20)
		return 0;
	text = malloc(size + 1);
	FUZZ_ASSERT(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&cfg, 0, sizeof(cfg));
	r = ncd_config_load_text("<fuzz>", text, &cfg);
	FUZZ_ASSERT(r == 0 || r == -1);
	if (r == 0) {
		FUZZ_ASSERT(cfg.nports >= 1 && cfg.nports <= NCD_MAX_PORTS);
		FUZZ_ASSERT(cfg.nworkers >= 1);
		FUZZ_ASSERT(cfg.nchannels <= NCD_MAX_CHANNELS);
		for (unsigned int i = 0; i < cfg.nchannels; i++) {
			FUZZ_ASSERT(nc_trie_rule_validate(&cfg.channels[i].rule) == 0);
			FUZZ_ASSERT(cfg.channels[i].port < cfg.nports);
		}
		for (unsigned int i = 0; i < cfg.nports; i++)
			FUZZ_ASSERT(cfg.ports[i].rx_queues >= 1 &&
				    cfg.ports[i].rx_queues <= NCD_MAX_QUEUES);
	}
	ncd_config_free(&cfg);
	free(text);
	return 0;
}
