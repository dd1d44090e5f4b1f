/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The maps of netchanneld's XDP program on an interface. They are found
 * from the program the kernel has attached, not from a pinned path: the
 * program outlives the daemon that loaded it (it is what keeps the host
 * online when the daemon is gone), and the next daemon, or a test, finds
 * it by the interface alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

#ifdef NCD_HAVE_LIBXDP
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#endif

#include <rte_common.h>

#include <nc_trie.h>

#include "port/xdp.h"

int
ncd_xdp_rule_claims(const struct nc_trie_rule *r, struct ncd_xdp_claim_key *keys,
		    unsigned int max)
{
	static const uint8_t both[] = { NC_TRIE_AF_INET, NC_TRIE_AF_INET6 };
	const uint8_t proto = r->proto_mask == 0xff ? r->proto : 0;
	const unsigned int nfam = r->family == NC_TRIE_AF_ANY ? 2 : 1;
	uint32_t lo = 0, hi = 0;
	unsigned int n = 0;

	/* A port range (or a value under a mask): its ports, if few; else any port. */
	if (proto != 0 && r->dport.kind == NC_TRIE_PORT_RANGE) {
		lo = r->dport.lo;
		hi = r->dport.hi;
	} else if (proto != 0 && r->dport.kind == NC_TRIE_PORT_MASK) {
		lo = r->dport.lo & r->dport.hi;
		hi = lo | (uint16_t)~r->dport.hi;
	}
	if (lo == 0 || hi - lo + 1 > NCD_XDP_MAX_PORTS_A_RULE)
		lo = hi = 0;
	/* A rule of either family claims in both: the program looks up the packet's only. */
	for (unsigned int f = 0; f < nfam; f++) {
		const uint8_t family = nfam == 2 ? both[f] : r->family;

		for (uint32_t p = lo; p <= hi; p++) {
			if (n == max)
				return -ENOSPC;
			keys[n++] = (struct ncd_xdp_claim_key){ family, proto, (uint16_t)p };
		}
		if (n == max)
			return -ENOSPC;
		keys[n++] = (struct ncd_xdp_claim_key){ family, NCD_XDP_ANY_OF_FAMILY, 0 };
	}
	return (int)n;
}

int
ncd_iface_driver(const char *iface, char *drv, size_t len)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	ifr.ifr_data = (void *)&info;
	if (ioctl(fd, SIOCETHTOOL, &ifr) != 0)
		rc = -errno;
	else
		snprintf(drv, len, "%s", info.driver);
	close(fd);
	return rc;
}

#ifdef NCD_HAVE_LIBXDP

/* The id of the program attached to ifindex, and the flags of its mode; 0 for none. */
static int
attached(unsigned int ifindex, uint32_t *id, uint32_t *mode_flags)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int rc = bpf_xdp_query((int)ifindex, 0, &q);

	if (rc != 0)
		return rc < 0 ? rc : -EIO;
	*id = q.prog_id;
	*mode_flags = q.attach_mode == XDP_ATTACHED_SKB ? XDP_FLAGS_SKB_MODE :
		      q.attach_mode == XDP_ATTACHED_HW ? XDP_FLAGS_HW_MODE : XDP_FLAGS_DRV_MODE;
	return 0;
}

/* Program id opened, if it is netchanneld's (by its name); else -1. */
static int
ours(uint32_t id)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	int fd = id != 0 ? bpf_prog_get_fd_by_id(id) : -1;

	if (fd < 0)
		return -1;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
	    strcmp(info.name, NCD_XDP_PROG_NAME) == 0)
		return fd;
	close(fd);
	return -1;
}

/* The program's maps of the names the daemon reads, opened (each -1 if it has none). */
static void
prog_maps(int prog_fd, struct ncd_xdp_maps *m)
{
	struct bpf_prog_info info;
	uint32_t ids[16], len = sizeof(info);

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = RTE_DIM(ids);
	info.map_ids = (uint64_t)(uintptr_t)ids;
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
		return;
	for (uint32_t i = 0; i < RTE_MIN(info.nr_map_ids, RTE_DIM(ids)); i++) {
		struct bpf_map_info mi;
		uint32_t mlen = sizeof(mi);
		int fd = bpf_map_get_fd_by_id(ids[i]), *slot = NULL;

		memset(&mi, 0, sizeof(mi));
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0)
			slot = strcmp(mi.name, NCD_XDP_CLAIMS_MAP) == 0 ? &m->claims_fd :
			       strcmp(mi.name, NCD_XDP_STATS_MAP) == 0 ? &m->stats_fd : NULL;
		if (slot != NULL && *slot < 0)
			*slot = fd;
		else if (fd >= 0)
			close(fd);
	}
}

int
ncd_xdp_maps_find(unsigned int ifindex, struct ncd_xdp_maps *m)
{
	uint32_t id = 0, flags;
	int fd, rc;

	m->claims_fd = m->stats_fd = -1;
	/* Whichever mode it was attached in (native, generic): the one that is there. */
	rc = attached(ifindex, &id, &flags);
	if (rc != 0)
		return rc;
	fd = ours(id);
	if (fd < 0)
		return -ENOENT;
	prog_maps(fd, m);
	close(fd);
	if (m->claims_fd < 0 || m->stats_fd < 0) {
		ncd_xdp_maps_close(m);
		return -ENOENT;
	}
	return 0;
}

int
ncd_xdp_detach(unsigned int ifindex, char *other, size_t len)
{
	uint32_t id = 0, flags = 0;
	int fd, rc = attached(ifindex, &id, &flags);

	if (rc != 0)
		return rc;
	if (id == 0)
		return 0;
	fd = ours(id);
	if (fd < 0) {
		struct bpf_prog_info info;
		uint32_t ilen = sizeof(info);
		int ofd = bpf_prog_get_fd_by_id(id);

		memset(&info, 0, sizeof(info));
		if (ofd >= 0 && bpf_obj_get_info_by_fd(ofd, &info, &ilen) == 0)
			snprintf(other, len, "id %u, %s", id, info.name);
		else
			snprintf(other, len, "id %u", id);
		if (ofd >= 0)
			close(ofd);
		return -EEXIST;
	}
	close(fd);
	rc = bpf_xdp_detach((int)ifindex, flags, NULL);
	return rc == 0 ? 1 : rc;
}

int
ncd_xdp_move_generic(unsigned int ifindex)
{
	uint32_t id = 0, flags = 0;
	int fd, rc = attached(ifindex, &id, &flags);

	if (rc != 0)
		return rc;
	fd = ours(id);
	if (fd < 0)
		return -ENOENT;
	if (flags == XDP_FLAGS_SKB_MODE) {
		close(fd);
		return 0;
	}
	/* Between the two the kernel gets everything, as when no daemon runs. */
	rc = bpf_xdp_detach((int)ifindex, flags, NULL);
	if (rc == 0)
		rc = bpf_xdp_attach((int)ifindex, fd, XDP_FLAGS_SKB_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST,
				    NULL);
	close(fd);
	return rc;
}

void
ncd_xdp_maps_close(struct ncd_xdp_maps *m)
{
	if (m->claims_fd >= 0)
		close(m->claims_fd);
	if (m->stats_fd >= 0)
		close(m->stats_fd);
	m->claims_fd = m->stats_fd = -1;
}

/* One key's count of channels up (delta 1) or down (-1); at zero the key goes. */
static int
claim_one(int claims_fd, const struct ncd_xdp_claim_key *k, int delta)
{
	uint32_t count = 0;

	if (bpf_map_lookup_elem(claims_fd, k, &count) != 0)
		count = 0;
	if (delta < 0 && count <= 1)
		return bpf_map_delete_elem(claims_fd, k) != 0 && errno != ENOENT ? -errno : 0;
	count = delta < 0 ? count - 1 : count + 1;
	return bpf_map_update_elem(claims_fd, k, &count, BPF_ANY) != 0 ? -errno : 0;
}

int
ncd_xdp_claim_keys(int claims_fd, const struct ncd_xdp_claim_key *keys, unsigned int n,
		   int delta)
{
	int first = 0;

	for (unsigned int i = 0; i < n; i++) {
		int rc = claim_one(claims_fd, &keys[i], delta);

		if (rc == 0)
			continue;
		if (delta < 0) {
			first = first != 0 ? first : rc;
			continue;
		}
		/* A claim half made would stay for ever: take back what this call added. */
		while (i-- > 0)
			claim_one(claims_fd, &keys[i], -1);
		return rc;
	}
	return first;
}

int
ncd_xdp_claim(int claims_fd, const struct nc_trie_rule *r, int delta)
{
	struct ncd_xdp_claim_key keys[NCD_XDP_RULE_KEYS];
	int n = ncd_xdp_rule_claims(r, keys, RTE_DIM(keys));

	if (n < 0)
		return n;
	return ncd_xdp_claim_keys(claims_fd, keys, (unsigned int)n, delta);
}

int
ncd_xdp_claims_count(int claims_fd)
{
	struct ncd_xdp_claim_key k, next;
	const void *prev = NULL;
	int n = 0;

	while (bpf_map_get_next_key(claims_fd, prev, &next) == 0) {
		k = next;
		prev = &k;
		n++;
	}
	return errno == ENOENT ? n : -errno;
}

int
ncd_xdp_stats_read(int stats_fd, uint64_t out[NCD_XDP_STATS])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EIO;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (v == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < NCD_XDP_STATS; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(stats_fd, &k, v) != 0) {
			int rc = -errno;

			free(v);
			return rc;
		}
		for (int c = 0; c < ncpu; c++)
			out[k] += v[c];
	}
	free(v);
	return 0;
}

#else

int
ncd_xdp_maps_find(unsigned int ifindex, struct ncd_xdp_maps *m)
{
	(void)ifindex;
	m->claims_fd = m->stats_fd = -1;
	return -ENOTSUP;
}

int
ncd_xdp_detach(unsigned int ifindex, char *other, size_t len)
{
	(void)ifindex;
	(void)other;
	(void)len;
	return -ENOTSUP;
}

int
ncd_xdp_move_generic(unsigned int ifindex)
{
	(void)ifindex;
	return -ENOTSUP;
}

void
ncd_xdp_maps_close(struct ncd_xdp_maps *m)
{
	m->claims_fd = m->stats_fd = -1;
}

int
ncd_xdp_claim_keys(int claims_fd, const struct ncd_xdp_claim_key *keys, unsigned int n,
		   int delta)
{
	(void)claims_fd;
	(void)keys;
	(void)n;
	(void)delta;
	return -ENOTSUP;
}

int
ncd_xdp_claim(int claims_fd, const struct nc_trie_rule *r, int delta)
{
	(void)claims_fd;
	(void)r;
	(void)delta;
	return -ENOTSUP;
}

int
ncd_xdp_claims_count(int claims_fd)
{
	(void)claims_fd;
	return -ENOTSUP;
}

int
ncd_xdp_stats_read(int stats_fd, uint64_t out[NCD_XDP_STATS])
{
	(void)stats_fd;
	(void)out;
	return -ENOTSUP;
}

#endif
