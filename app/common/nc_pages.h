/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's channel listings page by page ("show channel all|brief from
 * ID"): a control socket reply holds 64 KiB, a listing of thousands of
 * channels does not. Shared by ncctl and nc-exporter.
 */
#ifndef NC_PAGES_H
#define NC_PAGES_H

#include <stdio.h>

#include <jansson.h>

struct nc_client;

/**
 * Run "show channel <what> from ID" until the last page.
 *
 * @param c     a connection (NC_CONNECT_CONTROL is enough)
 * @param what  "all" or "brief"
 * @param all   JSON: every page's channels are appended here; NULL for text
 * @param text  text: every page is written here, without the lines that
 *              say where the next starts (ignored for JSON)
 * @param out   on a failure, the failed page's reply (the daemon's words), or
 *              NULL; the caller frees it
 * @return 0, the daemon's -errno, or -EBADMSG (a page that is not what it should be)
 */
int nc_pages_channels(struct nc_client *c, const char *what, json_t *all, FILE *text, char **out);

#endif
