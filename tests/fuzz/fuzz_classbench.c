/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ClassBench reader on any file: 0 with rules that all pass
 * nc_trie_rule_validate() (and go into a trie), or -errno with a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "nc_trie.h"
#include "nc_trie_tools.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nc_trie_config tc = NC_TRIE_SIZED(nc_trie_config, .name = "fuzz", .socket_id = -1,
			.max_rules = 4096);
	struct nc_trie_rule *rules = NULL;
	char path[64], err[256];
	uint32_t n = 0;
	int fd = memfd_create("classbench", MFD_CLOEXEC), r;

	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, data, size) == (ssize_t)size);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err[0] = '\0';
	r = nc_classbench_read(path, &rules, &n, err, sizeof(err));
	close(fd);
	if (r != 0) {
		FUZZ_ASSERT(r < 0 && err[0] != '\0');
		free(rules);
		return 0;
	}
	if (n > 0 && n <= tc.max_rules) {
		struct nc_trie *t = nc_trie_create(&tc);

		FUZZ_ASSERT(t != NULL);
		for (uint32_t i = 0; i < n; i++) {
			FUZZ_ASSERT(nc_trie_rule_validate(&rules[i]) == 0);
			int id = nc_trie_add(t, &rules[i]);

			FUZZ_ASSERT(id >= 0 || id == -EEXIST);
		}
		nc_trie_free(t);
	}
	free(rules);
	return 0;
}
