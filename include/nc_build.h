/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The build that a zero-copy client must share with the daemon: a DPDK
 * secondary process maps the daemon's memory as its own, so the release, the
 * source (git describe), DPDK and the shared memory's layout must all be the
 * daemon's. Not installed: the daemon and libnetchannel_zc of one build use
 * it, with DPDK's headers. Two builds of one dirty tree look alike.
 */
#ifndef NC_BUILD_H
#define NC_BUILD_H

#include <stddef.h>
#include <stdio.h>

#include <rte_version.h>

#include "nc_shm.h"
#include "nc_version.h"

/** The build, as HELLO names it (nc_ctl_hello.build), into buf of size bytes. */
static inline void
nc_build_zc(char *buf, size_t size)
{
	snprintf(buf, size, "netchanneld %s (%s), %s, shared memory layout %d", NC_PROJECT_VERSION,
		 NC_GIT_DESCRIBE, rte_version(), NC_SHM_LAYOUT_VERSION);
}

#endif
