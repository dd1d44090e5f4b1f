/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What netchanneld shares with its clients: an isolated client's region (nc_region.h), a
 * zero-copy client's shared memory (nc_shm.h) and the control protocol (nc_ctl.h). libnetchannel's users need neither: netchannel.h is its whole API.
 */
#ifndef NC_PROTO_H
#define NC_PROTO_H

#include "nc_ctl.h"
#include "nc_region.h"
#include "nc_shm.h"

#endif /* NC_PROTO_H */
