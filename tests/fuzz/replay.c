/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Without libFuzzer: run a fuzz target once on every file under the
 * directories (or files) given, in name order, and say how many.
 *   replay [--min N] DIR|FILE...
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
one(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	/* Exactly n bytes on the heap, so ASan sees a read past the input. */
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int
by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int
main(int argc, char **argv)
{
	unsigned long done = 0, min = 0;
	int bad = 0, first = 1;

	/* --min N: fewer inputs than that means the corpus went missing. */
	if (argc > 2 && strcmp(argv[1], "--min") == 0) {
		min = strtoul(argv[2], NULL, 10);
		first = 3;
	}
	for (int i = first; i < argc; i++) {
		struct stat st;
		struct dirent **names;
		int n;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= one(argv[i]);
			done++;
			continue;
		}
		n = scandir(argv[i], &names, NULL, by_name);
		for (int k = 0; k < n; k++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
			if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				bad |= one(path);
				done++;
			}
			free(names[k]);
		}
		free(names);
	}
	if (done < min) {
		fprintf(stderr, "replay: %lu inputs, fewer than the %lu expected\n", done, min);
		return 1;
	}
	printf("replay: %lu inputs, every invariant held\n", done);
	return bad ? 1 : 0;
}
