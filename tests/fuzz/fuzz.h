/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fuzz targets' entry point. Built with clang and -fsanitize=fuzzer
 * (meson -Dfuzz=true, scripts/fuzz.sh), libFuzzer calls it; in every other
 * build, replay.c calls it on each file of the seed corpora and of regress/,
 * so the inputs that once crashed stay tests.
 */
#ifndef NC_FUZZ_H
#define NC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/** One input: return 0; a broken invariant aborts (FUZZ_ASSERT). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant: printed and aborted on, so libFuzzer and replay both report it. */
#define FUZZ_ASSERT(c) do { \
	if (!(c)) { \
		fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #c); \
		abort(); \
	} \
} while (0)

#endif
