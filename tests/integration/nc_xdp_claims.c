/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's claims in netchanneld's XDP program on an interface, made
 * and read as the daemon makes and reads them (port/xdp.c), for the tests:
 *
 *   nc_xdp_claims IFNAME claim|release udp|tcp|any PORT[-PORT]
 *   nc_xdp_claims IFNAME stats      (one JSON object)
 *   nc_xdp_claims IFNAME detach     (netchanneld's program taken off: "detached", or "none")
 *
 * Exit 0 done, 1 the maps were not found or an update failed, 2 bad usage.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nc_trie.h>

#include "port/xdp.h"

int
main(int argc, char **argv)
{
	struct ncd_xdp_maps m;
	unsigned int ifindex;
	int rc;

	if (argc < 3 || (strcmp(argv[2], "stats") != 0 && strcmp(argv[2], "detach") != 0 &&
			 argc != 5)) {
		fprintf(stderr, "usage: nc_xdp_claims IFNAME claim|release udp|tcp|any PORT[-PORT]"
				" | IFNAME stats | IFNAME detach\n");
		return 2;
	}
	ifindex = if_nametoindex(argv[1]);
	if (ifindex == 0) {
		fprintf(stderr, "nc_xdp_claims: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (strcmp(argv[2], "detach") == 0) {
		char other[64] = "";

		rc = ncd_xdp_detach(ifindex, other, sizeof(other));
		if (rc == -EEXIST) {
			fprintf(stderr, "nc_xdp_claims: detach from %s: not netchanneld's program (%s)\n",
				argv[1], other);
			return 1;
		}
		if (rc < 0) {
			fprintf(stderr, "nc_xdp_claims: detach from %s: %s\n", argv[1], strerror(-rc));
			return 1;
		}
		printf("%s\n", rc == 1 ? "detached" : "none");
		return 0;
	}
	rc = ncd_xdp_maps_find(ifindex, &m);
	if (rc != 0) {
		fprintf(stderr, "nc_xdp_claims: the XDP program's maps on %s: %s\n", argv[1],
			strerror(-rc));
		return 1;
	}
	if (strcmp(argv[2], "stats") == 0) {
		uint64_t s[NCD_XDP_STATS];

		rc = ncd_xdp_stats_read(m.stats_fd, s);
		if (rc == 0)
			printf("{\"pass\": %llu, \"claimed\": %llu, \"no_socket\": %llu, "
			       "\"fragment\": %llu}\n", (unsigned long long)s[NCD_XDP_PASS],
			       (unsigned long long)s[NCD_XDP_CLAIMED],
			       (unsigned long long)s[NCD_XDP_NO_SOCKET],
			       (unsigned long long)s[NCD_XDP_FRAGMENT]);
	} else {
		struct nc_trie_rule r;
		unsigned long lo, hi;
		char *end;

		memset(&r, 0, sizeof(r));
		if (strcmp(argv[3], "udp") == 0 || strcmp(argv[3], "tcp") == 0) {
			r.proto = argv[3][0] == 'u' ? 17 : 6;
			r.proto_mask = 0xff;
		} else if (strcmp(argv[3], "any") != 0) {
			ncd_xdp_maps_close(&m);
			return 2;
		}
		lo = strtoul(argv[4], &end, 10);
		hi = *end == '-' ? strtoul(end + 1, &end, 10) : lo;
		if (*end != '\0' || lo > hi || hi > 65535 ||
		    (strcmp(argv[2], "claim") != 0 && strcmp(argv[2], "release") != 0)) {
			ncd_xdp_maps_close(&m);
			return 2;
		}
		r.dport = (struct nc_trie_port){ (uint16_t)lo, (uint16_t)hi, NC_TRIE_PORT_RANGE };
		rc = ncd_xdp_claim(m.claims_fd, &r, strcmp(argv[2], "claim") == 0 ? 1 : -1);
	}
	ncd_xdp_maps_close(&m);
	if (rc != 0) {
		fprintf(stderr, "nc_xdp_claims: %s on %s: %s\n", argv[2], argv[1], strerror(-rc));
		return 1;
	}
	return 0;
}
