/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether this CPU has PREFETCHW (see prefetch.h). */
#include <stdbool.h>

#ifdef RTE_ARCH_X86
#include <cpuid.h>
#endif
#include <rte_common.h>

#include "packet/prefetch.h"

bool ncd_has_prefetchw;

#ifdef RTE_ARCH_X86
RTE_INIT(detect_prefetchw)
{
	unsigned int eax, ebx, ecx, edx;

	ncd_has_prefetchw = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 8));
}
#endif
