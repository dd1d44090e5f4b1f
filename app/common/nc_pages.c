/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nc_pages.h"
#include "netchannel.h"

int
nc_pages_channels(struct nc_client *c, const char *what, json_t *all, FILE *text, char **out)
{
	long long from = 0;

	*out = NULL;
	while (from >= 0) {
		char line[64];
		int ret;

		snprintf(line, sizeof(line), "show channel %s from %lld", what, from);
		free(*out);
		ret = nc_cli(c, line, all != NULL, out);
		if (ret != 0)
			return ret;
		from = -1;
		if (all != NULL) {
			json_t *page = json_loads(*out, 0, NULL), *next;

			if (page == NULL || json_array_extend(all, json_object_get(page, "channels"))) {
				json_decref(page);
				free(*out);
				*out = NULL;   /* not the daemon's words: the caller reports it */
				return -EBADMSG;
			}
			next = json_object_get(page, "next");
			if (json_is_integer(next))
				from = json_integer_value(next);
			json_decref(page);
		} else {
			/* The page's last line, "next: ID", if there is another. */
			size_t len = strlen(*out);
			char *last = *out + (len > 0 ? len - 1 : 0);

			while (last > *out && last[-1] != '\n')
				last--;
			if (strncmp(last, "next: ", 6) == 0) {
				from = strtoll(last + 6, NULL, 10);
				*last = '\0';
			}
			fputs(*out, text);
		}
	}
	free(*out);
	*out = NULL;
	return 0;
}
