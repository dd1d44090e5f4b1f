/* SPDX-License-Identifier: BSD-3-Clause */
/* Prefetching a line a worker is about to write: a line another core last touched. */
#ifndef NCD_DATAPATH_PREFETCH_H
#define NCD_DATAPATH_PREFETCH_H

#include <stdbool.h>

#include <rte_branch_prediction.h>
#include <rte_prefetch.h>

/* Whether the CPU has PREFETCHW (CPUID 0x80000001, ECX bit 8); set at start (prefetch.c). */
extern bool ncd_has_prefetchw;

/*
 * Prefetch a line this core is about to write. __builtin_prefetch(p, 1)
 * gives a read prefetch at this build's -march (corei7 has no PREFETCHW):
 * the instruction by hand where the CPU has it (a branch that always goes
 * the same way), a read prefetch elsewhere.
 */
static inline void
ncd_prefetch_for_write(const void *p)
{
#ifdef RTE_ARCH_X86
	if (likely(ncd_has_prefetchw)) {
		asm volatile("prefetchw %0" : : "m"(*(const volatile char *)p));
		return;
	}
#endif
	rte_prefetch0(p);
}

#endif
