/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netchanneld's XDP program for net_af_xdp ports in fail-open mode: only
 * what a channel could claim goes to the daemon's AF_XDP socket; everything
 * else, and everything when no socket is bound (the daemon is down), goes to
 * the kernel as if nothing were there.
 *
 * What a channel could claim is coarse on purpose: a packet's family,
 * protocol and destination port, looked up exactly, then with any port, then
 * with any protocol (ncd_claims, kept by the daemon, which writes a rule of
 * either family as one of each).
 * The daemon's own classifier decides the rest, and sends what it was given
 * but no channel takes to the kernel by its exception path. IPv6 extension
 * headers are walked (up to NCD_XDP_EXT_HEADERS). Fragments, and longer
 * chains, go to the daemon whenever anything of their family is claimed (the
 * key NCD_XDP_ANY_OF_FAMILY): only a first fragment carries the ports, and
 * the daemon reassembles.
 *
 * The redirect falls back to XDP_PASS (bpf_redirect_map()'s flags) when the
 * queue has no socket in xsks_map: the socket goes with the process that
 * held it, so a daemon that dies, or is killed, leaves the host online.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "ncd_xdp.h"

/* DPDK's net_af_xdp puts its sockets here, by queue, under this name. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, NCD_XDP_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

/* Claimed keys: how many of the daemon's channels claim each. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NCD_XDP_CLAIMS);
	__type(key, struct ncd_xdp_claim_key);
	__type(value, __u32);
} ncd_claims SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NCD_XDP_STATS);
	__type(key, __u32);
	__type(value, __u64);
} ncd_xdp_stats SEC(".maps");

static __always_inline void
count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&ncd_xdp_stats, &what);

	if (n != NULL)
		*n += 1;
}

static __always_inline int
claimed(__u8 family, __u8 proto, __u16 dport)
{
	struct ncd_xdp_claim_key k = { .family = family, .proto = proto, .dport = dport };

	if (bpf_map_lookup_elem(&ncd_claims, &k) != NULL)
		return 1;
	k.dport = 0;
	if (bpf_map_lookup_elem(&ncd_claims, &k) != NULL)
		return 1;
	k.proto = 0;
	return bpf_map_lookup_elem(&ncd_claims, &k) != NULL;
}

/* Anything of the family claimed. */
static __always_inline int
family_claimed(__u8 family)
{
	struct ncd_xdp_claim_key k = { .family = family, .proto = NCD_XDP_ANY_OF_FAMILY };

	return bpf_map_lookup_elem(&ncd_claims, &k) != NULL;
}

/* To the daemon's socket of this queue, or to the kernel if it has none. */
static __always_inline int
to_daemon(struct xdp_md *ctx, __u32 why)
{
	int rc = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);

	count(rc == XDP_REDIRECT ? why : NCD_XDP_NO_SOCKET);
	return rc;
}

static __always_inline int
pass(void)
{
	count(NCD_XDP_PASS);
	return XDP_PASS;
}

/* A packet of a whole datagram, its transport header at l4: by its protocol and port. */
static __always_inline int
by_port(struct xdp_md *ctx, __u8 family, __u8 proto, void *l4, void *end)
{
	__u16 *ports = l4;

	if (proto != IPPROTO_UDP && proto != IPPROTO_TCP && proto != IPPROTO_SCTP)
		return claimed(family, proto, 0) ? to_daemon(ctx, NCD_XDP_CLAIMED) : pass();
	if ((void *)(ports + 2) > end)
		return pass();
	return claimed(family, proto, bpf_ntohs(ports[1])) ? to_daemon(ctx, NCD_XDP_CLAIMED)
							   : pass();
}

SEC("xdp")
int
ncd_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3 = eth + 1, *l4;
	__u16 type;
	__u8 proto;

	if (l3 > end)
		return pass();
	type = eth->h_proto;
	/* One VLAN tag (802.1Q or 802.1ad), as the daemon's parser takes. */
	if (type == bpf_htons(ETH_P_8021Q) || type == bpf_htons(ETH_P_8021AD)) {
		__u16 *tag = l3;

		if ((void *)(tag + 2) > end)
			return pass();
		type = tag[1];
		l3 = tag + 2;
	}
	if (type == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return pass();
		proto = ip->protocol;
		if (ip->frag_off & bpf_htons(0x3fff))
			return family_claimed(4) ? to_daemon(ctx, NCD_XDP_FRAGMENT) : pass();
		return by_port(ctx, 4, proto, (void *)ip + ip->ihl * 4, end);
	}
	if (type == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > end)
			return pass();
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
		/*
		 * Hop-by-hop, routing and destination options are walked, so that
		 * the kernel's own (MLD's hop-by-hop) stay the kernel's. A fragment,
		 * or a chain longer than this walks, is the daemon's if the family
		 * has claims: its parser walks further and reassembles.
		 */
#pragma unroll
		for (int i = 0; i < NCD_XDP_EXT_HEADERS; i++) {
			__u8 *ext = l4;

			if (proto != 0 && proto != 43 && proto != 60)
				break;
			if ((void *)(ext + 2) > end)
				return pass();
			proto = ext[0];
			l4 = ext + (ext[1] + 1) * 8;
		}
		if (proto == 0 || proto == 43 || proto == 44 || proto == 60)
			return family_claimed(6) ? to_daemon(ctx, NCD_XDP_FRAGMENT) : pass();
		return by_port(ctx, 6, proto, l4, end);
	}
	return pass();
}

char _license[] SEC("license") = "Dual BSD/GPL";
