/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Next hops for clients' IP packets: the seed's route_get_raw(), from user
 * space. The kernel owns the routing and neighbour tables of the port's
 * exception interface (the TAP that carries the port's MAC), so the answer
 * to "which MAC does this destination go to" is asked of it, over netlink,
 * and cached with an expiry ("update cached route when it expires").
 *
 * Workers only read the cache, a direct-mapped table of seqlocked slots: no
 * lock, no syscall. A packet whose destination is not cached (or expired) is
 * handed to the control thread, which asks the kernel, fills the cache, puts
 * the finished frame back on its channel's transmit ring and, if the
 * neighbour is unresolved, asks the kernel to resolve it (NTF_USE), so the
 * next packet finds it. Only the packets that found no route or no neighbour
 * are dropped, and they are counted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <libmnl/libmnl.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_nexthop
#include "channel/channel.h"
#include "core/host_check.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "nexthop/nl.h"
#include "packet/parse.h"
#include "port/port.h"

#define NL_TIMEOUT_MS 200
#define NL_BUF NCD_NL_BUF
#define NH_REQ_RING 1024
/*
 * Packets waiting for a neighbour the kernel is resolving, as its arp_queue
 * keeps them: a few per neighbour, for as long as the kernel's three probes
 * a second apart take; then sent, or dropped and counted.
 */
#define NH_WAIT_PER_DST 3
#define NH_WAIT_MAX 256
/* A client's packets waiting at once: no client takes every entry from the others. */
#define NH_WAIT_PER_OWNER 32
#define NH_WAIT_MS 3000
#define NH_RETRY_MS 20                 /* a waiting neighbour is asked again at most this often */

static struct nh_wait {
	struct rte_mbuf *m;            /* NULL: a free entry */
	uint64_t deadline, tried;      /* ms */
	uint64_t generation;           /* its channel's then: another channel may have the id now */
	int owner;                     /* its channel's owner: a client's slot, or the operator */
	uint16_t port;
	uint8_t family;
	union nc_trie_addr dst;        /* the packet's destination, as the cache keys it (aligned) */
} waiting[NH_WAIT_MAX];

static struct mnl_socket *nl;
static struct mnl_socket *nl_events;   /* the kernel's address changes, as they happen */
static unsigned int nl_portid;
static uint32_t nl_seq;

static inline uint32_t
slot_of(uint8_t family, const uint8_t *addr)
{
	return rte_jhash(addr, family == 4 ? 4 : 16, family) & (NCD_NH_SLOTS - 1);
}

int
ncd_nh_get(const struct ncd_nh_cache *c, uint8_t family, const uint8_t *addr, uint64_t now,
	   uint8_t mac[6])
{
	const struct ncd_nh_slot *s = &c->slot[slot_of(family, addr)];
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (seq & 1)
		return 0;                      /* being written */
	if (s->family == family && memcmp(s->addr, addr, family == 4 ? 4 : 16) == 0 &&
	    s->expires > now) {
		ret = s->status;
		if (ret == 1)
			memcpy(mac, s->mac, 6);
	}
	/* Acquire fence, then the sequence again: the reads above saw one whole version. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq ? ret : 0;
}

/* Cache an answer: status 1 with mac, or a failure (-ENETUNREACH, -EHOSTUNREACH) for a while. */
static void
nh_put(struct ncd_nh_cache *c, uint8_t family, const uint8_t *addr, int status,
       const uint8_t mac[6], uint64_t expires)
{
	struct ncd_nh_slot *s = &c->slot[slot_of(family, addr)];
	uint32_t seq = s->seq;

	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->family = family;
	memset(s->addr, 0, sizeof(s->addr));
	memcpy(s->addr, addr, family == 4 ? 4 : 16);
	s->status = (int8_t)status;
	memset(s->mac, 0, 6);
	if (status == 1)
		memcpy(s->mac, mac, 6);
	s->expires = expires;
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/*
 * Send a request and run cb on each message of its answer (libmnl checks the
 * sequence number and turns an error message into errno). A late answer to an
 * earlier request, one that timed out, is skipped.
 * @return 0, or -errno: the kernel's, -ETIMEDOUT, or cb's
 */
static int
nl_call(struct nlmsghdr *req, mnl_cb_t cb, void *data)
{
	uint8_t buf[NL_BUF];
	uint32_t seq = ++nl_seq;

	req->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		int ret = mnl_cb_run(buf, (size_t)n, seq, nl_portid, cb, data);

		/* A dump's answer is many messages, up to NLMSG_DONE (MNL_CB_STOP). */
		if (ret == MNL_CB_STOP || (ret > 0 && !(req->nlmsg_flags & NLM_F_DUMP)))
			return 0;
		if (ret > 0)
			continue;
		if (errno != EILSEQ)
			return -errno;
	}
}

/* A request of type, with a family header of hlen bytes, in buf. */
static struct nlmsghdr *
nl_request(uint8_t *buf, uint16_t type, uint16_t flags, size_t hlen, void **hdr)
{
	struct nlmsghdr *n = mnl_nlmsg_put_header(buf);

	n->nlmsg_type = type;
	n->nlmsg_flags = NLM_F_REQUEST | flags;
	*hdr = mnl_nlmsg_put_extra_header(n, hlen);
	return n;
}

int
ncd_nl_call(struct nlmsghdr *req, mnl_cb_t cb, void *data)
{
	return nl == NULL ? -ENOTCONN : nl_call(req, cb, data);
}

struct nlmsghdr *
ncd_nl_request(uint8_t *buf, uint16_t type, uint16_t flags, size_t hlen, void **hdr)
{
	return nl_request(buf, type, flags, hlen, hdr);
}

/* What a route answer says. */
struct route {
	size_t alen;                   /* the family's address length */
	int oif;
	uint8_t *gw;
	bool has_gw;
};

static int
route_attr(const struct nlattr *a, void *data)
{
	struct route *r = data;

	if (mnl_attr_get_type(a) == RTA_OIF && mnl_attr_get_payload_len(a) >= sizeof(int)) {
		memcpy(&r->oif, mnl_attr_get_payload(a), sizeof(int));
	} else if (mnl_attr_get_type(a) == RTA_GATEWAY && mnl_attr_get_payload_len(a) == r->alen) {
		memcpy(r->gw, mnl_attr_get_payload(a), r->alen);
		r->has_gw = true;
	}
	return MNL_CB_OK;
}

static int
route_answer(const struct nlmsghdr *h, void *data)
{
	if (h->nlmsg_type != RTM_NEWROUTE) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	return mnl_attr_parse(h, sizeof(struct rtmsg), route_attr, data);
}

/* The kernel's route to dst: its interface, and the gateway if there is one. */
static int
route_get(uint8_t family, const uint8_t *dst, int *oif, uint8_t *gw, bool *has_gw)
{
	uint8_t buf[NL_BUF];
	struct route r = { .alen = family == 4 ? 4 : 16, .gw = gw };
	struct rtmsg *rt;
	struct nlmsghdr *n = nl_request(buf, RTM_GETROUTE, 0, sizeof(*rt), (void **)&rt);
	int ret;

	rt->rtm_family = family == 4 ? AF_INET : AF_INET6;
	rt->rtm_dst_len = (uint8_t)(r.alen * 8);
	mnl_attr_put(n, RTA_DST, r.alen, dst);
	ret = nl_call(n, route_answer, &r);
	*oif = r.oif;
	*has_gw = r.has_gw;
	return ret;
}

/* What a neighbour answer says. */
struct neigh {
	uint8_t *mac;
	bool has_mac;
	uint16_t state;
};

static int
neigh_attr(const struct nlattr *a, void *data)
{
	struct neigh *nb = data;

	if (mnl_attr_get_type(a) == NDA_LLADDR && mnl_attr_get_payload_len(a) == 6) {
		memcpy(nb->mac, mnl_attr_get_payload(a), 6);
		nb->has_mac = true;
	}
	return MNL_CB_OK;
}

static int
neigh_answer(const struct nlmsghdr *h, void *data)
{
	struct neigh *nb = data;

	if (h->nlmsg_type != RTM_NEWNEIGH) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	nb->state = ((const struct ndmsg *)mnl_nlmsg_get_payload(h))->ndm_state;
	return mnl_attr_parse(h, sizeof(struct ndmsg), neigh_attr, data);
}

/* The neighbour entry of addr on ifindex: 1 usable (mac set), 0 unresolved, or -errno. */
static int
neigh_get(uint8_t family, int ifindex, const uint8_t *addr, uint8_t mac[6])
{
	uint8_t buf[NL_BUF];
	struct neigh nb = { .mac = mac };
	struct ndmsg *nd;
	struct nlmsghdr *n = nl_request(buf, RTM_GETNEIGH, 0, sizeof(*nd), (void **)&nd);
	int ret;

	nd->ndm_family = family == 4 ? AF_INET : AF_INET6;
	nd->ndm_ifindex = ifindex;
	mnl_attr_put(n, NDA_DST, family == 4 ? 4 : 16, addr);
	ret = nl_call(n, neigh_answer, &nb);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	/* What the kernel itself would send to: confirmed, or stale but not failed. */
	return nb.has_mac && (nb.state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE |
					  NUD_PERMANENT | NUD_NOARP)) ? 1 : 0;
}

/* Ask the kernel to resolve addr (as `ip neigh replace ADDR dev IF use` does). */
static void
neigh_use(uint8_t family, int ifindex, const uint8_t *addr)
{
	uint8_t buf[NL_BUF];
	struct ndmsg *nd;
	struct nlmsghdr *n = nl_request(buf, RTM_NEWNEIGH,
					NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, sizeof(*nd),
					(void **)&nd);

	nd->ndm_family = family == 4 ? AF_INET : AF_INET6;
	nd->ndm_ifindex = ifindex;
	nd->ndm_state = NUD_NONE;
	nd->ndm_flags = NTF_USE;
	mnl_attr_put(n, NDA_DST, family == 4 ? 4 : 16, addr);
	nl_call(n, NULL, NULL);
}

/*
 * Ask the kernel for dst's next hop out of port p: 1 (mac set), -ENETUNREACH,
 * or -EINPROGRESS (the neighbour is not resolved: the kernel is asked to).
 */
static int
ask_kernel(struct ncd_port *p, uint8_t family, const uint8_t *dst, uint8_t mac[6])
{
	uint8_t gw[16], hop[16];
	bool has_gw;
	int oif, ret;

	if (p->nh_ifindex == 0 || nl == NULL)
		return -ENETUNREACH;
	memset(hop, 0, sizeof(hop));
	ret = route_get(family, dst, &oif, gw, &has_gw);
	/* A route out of another interface is not this port's to take. */
	if (ret != 0 || oif != p->nh_ifindex)
		return -ENETUNREACH;
	memcpy(hop, has_gw ? gw : dst, family == 4 ? 4 : 16);
	ret = neigh_get(family, oif, hop, mac);
	if (ret <= 0) {
		neigh_use(family, oif, hop);
		return -EINPROGRESS;
	}
	return 1;
}

/*
 * Resolve dst out of port pi, through the cache: 1 (mac set), -ENETUNREACH,
 * -EHOSTUNREACH (it failed a moment ago), -EINPROGRESS (being resolved).
 */
static int
resolve(struct ncd *d, unsigned int pi, uint8_t family, const uint8_t *dst, uint8_t mac[6])
{
	struct ncd_port *p = &d->ports[pi];
	uint64_t now = rte_get_tsc_cycles(), ms = rte_get_tsc_hz() / 1000;
	int ret = ncd_nh_get(p->nh, family, dst, now, mac);

	if (ret != 0)
		return ret;
	ret = ask_kernel(p, family, dst, mac);
	if (ret == 1)
		p->nh_stats.resolved++;
	else if (ret == -ENETUNREACH)
		p->nh_stats.no_route++;
	else
		p->nh_stats.no_neigh++;
	/*
	 * Failures are cached briefly, so a flood of them does not become a flood
	 * of requests; but not a neighbour being resolved: its packets come here
	 * and wait for it (wait()).
	 */
	if (ret != -EINPROGRESS)
		nh_put(p->nh, family, dst, ret, mac,
		       now + ms * (ret == 1 ? NCD_NH_TTL_MS : NCD_NH_NEG_TTL_MS));
	return ret;
}

/* Each worker's ring of resolved packets (SP: this thread; SC: the worker). */
static struct rte_ring *nh_done[NCD_MAX_WORKERS];

struct rte_ring *
ncd_nh_done(unsigned int worker)
{
	return worker < NCD_MAX_WORKERS ? nh_done[worker] : NULL;
}

int
ncd_nh_init(struct ncd *d)
{
	struct timeval tv = { .tv_usec = NL_TIMEOUT_MS * 1000 };

	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port *p = &d->ports[i];
		struct rte_eth_dev_info info;

		p->nh = rte_zmalloc("ncd_nh", sizeof(*p->nh), RTE_CACHE_LINE_SIZE);
		if (p->nh == NULL) {
			NCD_LOG(ERR, "next-hop cache of port %s: out of memory", d->cfg.ports[i].name);
			return -1;
		}
		/* The kernel interface of the exception device (net_tap, net_af_xdp...), if any. */
		if (p->has_exc && rte_eth_dev_info_get(p->exc_id, &info) == 0)
			p->exc_ifindex = (int)info.if_index;
		/*
		 * The host's tables are those of the interface its addresses are on:
		 * the TAP's, or in exception mode xdp the port's own.
		 */
		p->nh_ifindex = p->xdp ? p->xdp_ifindex : p->exc_ifindex;
	}
	d->nh_req = rte_ring_create("ncd_nh_req", NH_REQ_RING, (int)rte_socket_id(), RING_F_SC_DEQ);
	d->nh_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->nh_req == NULL || d->nh_efd < 0) {
		NCD_LOG(ERR, "next-hop request ring: %s", rte_strerror(rte_errno));
		return -1;
	}
	/*
	 * Resolved packets go back to the worker on a ring of its own, not on the
	 * channel's tx ring: a client killed in the middle of an enqueue there
	 * would leave any other producer spinning for ever.
	 */
	for (unsigned int w = 0; w < d->cfg.nworkers; w++) {
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "ncd_nh_done_%u", w);
		nh_done[w] = rte_ring_create(name, NH_REQ_RING, (int)rte_socket_id(),
					     RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (nh_done[w] == NULL) {
			NCD_LOG(ERR, "rte_ring_create(%s): %s", name, rte_strerror(rte_errno));
			return -1;
		}
	}
	nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (nl == NULL || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) != 0) {
		/* Frames still go out; IP packets will find no route. */
		NCD_LOG(WARNING, "netlink socket: %s: clients' IP packets cannot be routed",
			strerror(errno));
		if (nl != NULL)
			mnl_socket_close(nl);
		nl = NULL;
		return 0;
	}
	nl_portid = mnl_socket_get_portid(nl);
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* Without it the host's addresses are still read every second. */
	nl_events = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (nl_events != NULL &&
	    mnl_socket_bind(nl_events, RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_LINK |
			    RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE, MNL_SOCKET_AUTOPID)) {
		mnl_socket_close(nl_events);
		nl_events = NULL;
	}
	return 0;
}

/* One change the kernel acknowledges: 0 or -errno. */
static int
nl_change(uint16_t type, size_t hlen, void (*fill)(struct nlmsghdr *, void *, const void *),
	  const void *arg)
{
	uint8_t buf[NL_BUF];
	void *hdr;
	struct nlmsghdr *n = nl_request(buf, type, NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, hlen,
					&hdr);

	fill(n, hdr, arg);
	return nl_call(n, NULL, NULL);
}

struct host_req {
	int ifindex;
	const struct ncd_host_conf *hc;
	unsigned int i;
	bool up;
};

/* RTM_NEWLINK: the interface's carrier, on or off (the kernel's tun implements it). */
static void
fill_carrier(struct nlmsghdr *n, void *hdr, const void *arg)
{
	const int *r = arg;
	struct ifinfomsg *ifi = hdr;

	n->nlmsg_flags &= (uint16_t)~(NLM_F_CREATE | NLM_F_REPLACE);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = r[0];
	mnl_attr_put_u8(n, IFLA_CARRIER, (uint8_t)r[1]);
}

int
ncd_exception_carrier(struct ncd *d, unsigned int pi, bool up)
{
	const int r[2] = { d->ports[pi].exc_ifindex, up };
	int ret;

	if (r[0] <= 0)
		return 0;
	ret = nl_change(RTM_NEWLINK, sizeof(struct ifinfomsg), fill_carrier, r);
	if (ret != 0)
		NCD_LOG(ERR, "port %s: the exception interface's carrier %s (IFLA_CARRIER): %s",
			d->cfg.ports[pi].name, up ? "on" : "off", strerror(-ret));
	return ret;
}

static void
fill_link(struct nlmsghdr *n, void *hdr, const void *arg)
{
	const struct host_req *r = arg;
	struct ifinfomsg *ifi = hdr;

	n->nlmsg_flags &= (uint16_t)~(NLM_F_CREATE | NLM_F_REPLACE);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = r->ifindex;
	ifi->ifi_flags = r->up ? IFF_UP : 0;
	ifi->ifi_change = IFF_UP;
	if (r->hc->mtu != 0)
		mnl_attr_put_u32(n, IFLA_MTU, r->hc->mtu);
}

static void
fill_addr(struct nlmsghdr *n, void *hdr, const void *arg)
{
	const struct host_req *r = arg;
	const struct ncd_host_addr *a = &r->hc->addr[r->i];
	struct ifaddrmsg *ifa = hdr;
	bool v4 = a->family == NC_TRIE_AF_INET;

	ifa->ifa_family = v4 ? AF_INET : AF_INET6;
	ifa->ifa_prefixlen = a->len;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (uint32_t)r->ifindex;
	mnl_attr_put(n, IFA_LOCAL, v4 ? 4 : 16, a->a.a);
	mnl_attr_put(n, IFA_ADDRESS, v4 ? 4 : 16, a->a.a);
	/* The address was the host's before the restart: no duplicate address detection. */
	if (!v4)
		mnl_attr_put_u32(n, IFA_FLAGS, IFA_F_NODAD);
}

static void
fill_route(struct nlmsghdr *n, void *hdr, const void *arg)
{
	const struct host_req *r = arg;
	const struct ncd_host_route *rt = &r->hc->route[r->i];
	struct rtmsg *m = hdr;
	bool v4 = rt->dst.family == NC_TRIE_AF_INET;

	m->rtm_family = v4 ? AF_INET : AF_INET6;
	m->rtm_dst_len = rt->dst.len;
	m->rtm_table = RT_TABLE_MAIN;
	m->rtm_protocol = RTPROT_STATIC;
	m->rtm_scope = rt->has_gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
	m->rtm_type = RTN_UNICAST;
	if (rt->dst.len > 0)
		mnl_attr_put(n, RTA_DST, v4 ? 4 : 16, rt->dst.a.a);
	if (rt->has_gw)
		mnl_attr_put(n, RTA_GATEWAY, v4 ? 4 : 16, rt->gw.a);
	mnl_attr_put_u32(n, RTA_OIF, (uint32_t)r->ifindex);
	mnl_attr_put_u32(n, RTA_PRIORITY, rt->metric);
}

int
ncd_host_apply(struct ncd *d, unsigned int pi, const struct ncd_host_conf *hc, bool up,
	       const char *what, const char *where)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[pi];
	struct host_req r = { .ifindex = d->ports[pi].exc_ifindex, .hc = hc, .up = up };
	unsigned int failed = 0;
	char a[INET6_ADDRSTRLEN];
	int ret;

	if (nl == NULL || r.ifindex == 0) {
		NCD_LOG(ERR, "port %s: the TAP's configuration %s %s: no netlink socket, or no "
			"kernel interface", pc->name, what, where);
		return -1;
	}
	/* Up (and its MTU) first, then its addresses, then the routes through them. */
	ret = nl_change(RTM_NEWLINK, sizeof(struct ifinfomsg), fill_link, &r);
	if (ret != 0) {
		NCD_LOG(ERR, "port %s: the TAP's configuration %s %s: link %s, mtu %u: %s", pc->name,
			what, where, up ? "up" : "down", hc->mtu, strerror(-ret));
		failed++;
	}
	for (r.i = 0; r.i < hc->naddr; r.i++) {
		const struct ncd_host_addr *x = &hc->addr[r.i];

		ret = nl_change(RTM_NEWADDR, sizeof(struct ifaddrmsg), fill_addr, &r);
		if (ret != 0) {
			inet_ntop(x->family == NC_TRIE_AF_INET ? AF_INET : AF_INET6, x->a.a, a,
				  sizeof(a));
			NCD_LOG(ERR, "port %s: the TAP's configuration %s %s: address %s/%u: %s",
				pc->name, what, where, a, x->len, strerror(-ret));
			failed++;
		}
	}
	for (r.i = 0; r.i < hc->nroute; r.i++) {
		const struct ncd_host_route *x = &hc->route[r.i];

		ret = nl_change(RTM_NEWROUTE, sizeof(struct rtmsg), fill_route, &r);
		if (ret != 0) {
			inet_ntop(x->dst.family == NC_TRIE_AF_INET ? AF_INET : AF_INET6, x->dst.a.a,
				  a, sizeof(a));
			NCD_LOG(ERR, "port %s: the TAP's configuration %s %s: route %s/%u: %s",
				pc->name, what, where, a, x->dst.len, strerror(-ret));
			failed++;
		}
	}
	NCD_LOG(NOTICE, "port %s: the host's configuration of its TAP (%s %s): %u addresses, "
		"%u routes, mtu %u, %s%s", pc->name, what, where, hc->naddr, hc->nroute, hc->mtu,
		up ? "up" : "down", failed ? " (some failed: see above)" : "");
	return failed ? -1 : 0;
}

/* Write a sysctl of interface iface ("net/ipv4/conf/%s/rp_filter"). @return 0 or -errno. */
static int
iface_sysctl(const char *fmt, const char *iface, const char *value)
{
	char path[128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), fmt, iface);
	f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	if (fputs(value, f) < 0)
		ret = -EIO;
	if (fclose(f) != 0 && ret == 0)
		ret = -errno;
	return ret;
}

/*
 * Exception mode xdp: the TAP only hands the kernel what the XDP program
 * sent the daemon but no channel took; the host's addresses are on the
 * port's own interface. It carries no address (no IPv6 link-local either,
 * which would have it speak on the wire as a second host). The kernel takes
 * a packet for one of its addresses from any interface, but IPv4's reverse
 * path filter, strict or loose, drops what comes in on an interface without
 * an IPv4 address: the TAP's is off, and the kernel takes the larger of its
 * and net.ipv4.conf.all's, so a host whose "all" is on is warned.
 */
static int
xdp_tap_setup(struct ncd *d, unsigned int pi)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[pi];
	static const struct ncd_host_conf none;
	char iface[IF_NAMESIZE];
	int ret = 0, rc;

	if (pc->exc_device == NULL || !ncd_devargs_iface(pc->exc_device, iface, sizeof(iface)))
		return 0;
	rc = iface_sysctl("/proc/sys/net/ipv6/conf/%s/addr_gen_mode", iface, "1");
	if (rc == 0)
		rc = iface_sysctl("/proc/sys/net/ipv4/conf/%s/rp_filter", iface, "0");
	if (rc != 0) {
		NCD_LOG(ERR, "port %s: exception mode xdp: the sysctls of TAP %s (addr_gen_mode, "
			"rp_filter): %s", pc->name, iface, strerror(-rc));
		ret = -1;
	}
	if (ncd_rp_filter_all() > 0)
		NCD_LOG(WARNING, "port %s: exception mode xdp: net.ipv4.conf.all.rp_filter is %d, "
			"so the kernel drops the IPv4 packets the XDP program sent the daemon but no "
			"channel took, as they come in on TAP %s: set it to 0 (docs/config.md, "
			"exception mode xdp)", pc->name, ncd_rp_filter_all(), iface);
	/* Down and up: the link-local address it got as it came up goes, and none comes. */
	if (ncd_host_apply(d, pi, &none, false, "in exception mode xdp:", "no addresses") != 0 ||
	    ncd_host_apply(d, pi, &none, true, "in exception mode xdp:", "no addresses") != 0)
		ret = -1;
	return ret;
}

int
ncd_exception_host_apply(struct ncd *d, unsigned int pi)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[pi];

	if (pc->xdp)
		return xdp_tap_setup(d, pi);
	if (pc->has_host)
		return ncd_host_apply(d, pi, &pc->host, true, "exception.host", "of the config");
	return ncd_host_keep_restore(d, pi);
}

int
ncd_nh_events_fd(void)
{
	return nl_events != NULL ? mnl_socket_get_fd(nl_events) : -1;
}

/* A worker with a tx queue on port op, to send a resolved NAT packet: -1 if none. */
static int
sender_of(const struct ncd *d, uint16_t op)
{
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		if (d->ports[op].txq[w] != NCD_NO_TXQ)
			return (int)w;
	return -1;
}

/*
 * One packet a worker handed over: a client's IP packet (out of its
 * channel's port), or a NAT channel's translated one (out of the NAT's port,
 * or the one it came in on, m->port). Its frame is built and checked; only
 * its destination MAC is missing.
 */
/* Whether entry x holds a packet waiting for dst's neighbour out of port op. */
static bool
waits_for(const struct nh_wait *x, uint16_t op, uint8_t family, const uint8_t *dst)
{
	return x->m != NULL && x->port == op && x->family == family &&
	       memcmp(x->dst.a, dst, family == 4 ? 4 : 16) == 0;
}

/* Packets waiting for dst's neighbour out of port op; the first one's deadline to *deadline. */
static unsigned int
waiting_for(uint16_t op, uint8_t family, const uint8_t *dst, uint64_t *deadline)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < NH_WAIT_MAX; i++)
		if (waits_for(&waiting[i], op, family, dst) && n++ == 0 && deadline != NULL)
			*deadline = waiting[i].deadline;
	return n;
}

/*
 * Keep a packet until its neighbour resolves (or NH_WAIT_MS pass): false when
 * its neighbour has NH_WAIT_PER_DST waiting already, or every entry is taken
 * (counted in queue_full: the caller drops it as unresolved).
 */
static bool
wait(struct ncd *d, struct rte_mbuf *m, const struct ncd_channel *ch, uint16_t op,
     uint8_t family, const uint8_t *dst)
{
	uint64_t now = ncd_now_ms(), deadline = now + NH_WAIT_MS;
	/* Its neighbour's first packet set the deadline for all of them. */
	unsigned int n = waiting_for(op, family, dst, &deadline);

	/* A client's own share of the entries, whatever its neighbours. */
	if (ch->owner >= 0 && ncd_nh_waiting(ch->owner) >= NH_WAIT_PER_OWNER)
		n = NH_WAIT_PER_DST;
	for (unsigned int i = 0; n < NH_WAIT_PER_DST && i < NH_WAIT_MAX; i++) {
		struct nh_wait *x = &waiting[i];

		if (x->m != NULL)
			continue;
		*x = (struct nh_wait){ .m = m, .deadline = deadline, .tried = now,
				       .generation = ch->dir->generation, .owner = ch->owner,
				       .port = op, .family = family };
		memcpy(x->dst.a, dst, family == 4 ? 4 : 16);
		d->ports[op].nh_stats.queued++;
		return true;
	}
	d->ports[op].nh_stats.queue_full++;
	return false;
}

static void resolve_one(struct ncd *d, struct rte_mbuf *m);

unsigned int
ncd_nh_waiting(int owner)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < NH_WAIT_MAX; i++)
		n += waiting[i].m != NULL && waiting[i].owner == owner;
	return n;
}

int
ncd_nh_wait_ms(void)
{
	for (unsigned int i = 0; i < NH_WAIT_MAX; i++)
		if (waiting[i].m != NULL)
			return NH_RETRY_MS;
	return -1;
}

/*
 * The neighbours packets wait for, asked again: once one resolves, or its
 * time is up, its packets go through resolve_one() once more, which then
 * finds the answer in the cache: sent, or dropped and counted.
 */
static void
wait_run(struct ncd *d)
{
	uint64_t now = ncd_now_ms(), tsc = rte_get_tsc_cycles(), ms = rte_get_tsc_hz() / 1000;

	for (unsigned int i = 0; i < NH_WAIT_MAX; i++) {
		struct nh_wait x = waiting[i];
		struct ncd_port *p = &d->ports[x.port];
		uint8_t mac[6];
		int ret;

		if (x.m == NULL || now - x.tried < NH_RETRY_MS)
			continue;
		ret = ask_kernel(p, x.family, x.dst.a, mac);
		if (ret == -EINPROGRESS && now < x.deadline) {
			for (unsigned int k = i; k < NH_WAIT_MAX; k++)
				if (waits_for(&waiting[k], x.port, x.family, x.dst.a))
					waiting[k].tried = now;
			continue;
		}
		if (ret == 1)
			p->nh_stats.resolved++;
		else if (ret == -EINPROGRESS)
			ret = -EHOSTUNREACH;    /* its time is up */
		nh_put(p->nh, x.family, x.dst.a, ret, mac,
		       tsc + ms * (ret == 1 ? NCD_NH_TTL_MS : NCD_NH_NEG_TTL_MS));
		/*
		 * All of the neighbour's packets leave the queue first: one that went
		 * through resolve_one() while another still waited would wait again.
		 */
		struct rte_mbuf *go[NH_WAIT_MAX];
		uint64_t gen[NH_WAIT_MAX];
		unsigned int ngo = 0;

		for (unsigned int k = i; k < NH_WAIT_MAX; k++) {
			struct nh_wait *y = &waiting[k];

			if (!waits_for(y, x.port, x.family, x.dst.a))
				continue;
			gen[ngo] = y->generation;
			go[ngo++] = y->m;
			y->m = NULL;
		}
		if (ret != 1)
			p->nh_stats.failed += ngo;
		for (unsigned int k = 0; k < ngo; k++) {
			struct rte_mbuf *m = go[k];
			uint32_t id = m->hash.usr & ~NCD_NH_NAT;
			const struct ncd_channel *ch = id < d->cfg.max_channels ? d->channels[id] : NULL;

			/* A channel that went while it waited, and maybe another with its id. */
			if (ch == NULL || ch->dir->generation != gen[k]) {
				if (m->hash.usr & NCD_NH_NAT)
					d->ctl_pstats[m->port].drop_nat_tx++;
				rte_pktmbuf_free(m);
				continue;
			}
			resolve_one(d, m);
		}
	}
}

static void
resolve_one(struct ncd *d, struct rte_mbuf *m)
{
	uint32_t usr = m->hash.usr, id = usr & ~NCD_NH_NAT;
	bool nat = usr & NCD_NH_NAT;
	struct ncd_channel *ch = id < d->cfg.max_channels ? d->channels[id] : NULL;
	struct ncd_chan_stats *cs = &d->ctl_cstats[id < d->cfg.max_channels ? id : 0];
	struct ncd_port_stats *ps = nat ? &d->ctl_pstats[m->port] : NULL;
	uint8_t buf[256];
	uint32_t want = m->pkt_len < sizeof(buf) ? m->pkt_len : sizeof(buf);
	const uint8_t *f = rte_pktmbuf_read(m, 0, want, buf);
	struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct ncd_parsed pp;
	uint16_t op;
	int ret, w;

	if (ch == NULL || (nat ? ch->action != NC_ACTION_NAT : !ch->can_tx) ||
	    ncd_parse(f, want, m->pkt_len, NULL, NCD_PARSE_CSUM_GOOD, &pp) != NCD_PKT_OK) {
		/* Its channel went meanwhile. */
		if (ps != NULL)
			ps->drop_nat_tx++;
		rte_pktmbuf_free(m);
		return;
	}
	op = !nat ? ch->port : ch->nat.has_port ? ch->nat.port : m->port;
	w = nat ? sender_of(d, op) : (int)ch->tx_worker;
	/* Its neighbour is being resolved: it waits with the others, if there is room. */
	ret = waiting_for(op, pp.key.family, pp.key.dst.a, NULL) > 0 ? -EINPROGRESS :
	      resolve(d, op, pp.key.family, pp.key.dst.a, eh->dst_addr.addr_bytes);
	if (ret == -EINPROGRESS) {
		if (wait(d, m, ch, op, pp.key.family, pp.key.dst.a))
			return;
		ret = -EHOSTUNREACH;
	}
	/* The generation tells the worker whether the channel is still this one. */
	m->hash.fdir.hi = (uint32_t)ch->dir->generation;
	if (ret == 1 && w >= 0 && rte_ring_sp_enqueue(nh_done[w], m) == 0)
		return;
	if (nat) {
		if (ret == -ENETUNREACH) {
			cs->nat_drop_no_route++;
			ps->drop_nat_no_route++;
		} else if (ret == -EHOSTUNREACH) {
			cs->nat_drop_no_neigh++;
			ps->drop_nat_no_neigh++;
		} else {
			cs->nat_drop_tx++;
			ps->drop_nat_tx++;
		}
	} else if (ret == -ENETUNREACH) {
		cs->tx_no_route++;
	} else if (ret == -EHOSTUNREACH) {
		cs->tx_no_neigh++;
	} else {
		cs->tx_ring_full++;
	}
	rte_pktmbuf_free(m);
}

/* One address of a dump: kept if it is the interface's whose list is being filled. */
struct addr_dump {
	int ifindex;
	struct ncd_host_addrs *out;
};

static int
addr_attr(const struct nlattr *a, void *data)
{
	const uint8_t **addr = data;

	/* IFA_LOCAL is this end's address on a point-to-point link; IFA_ADDRESS otherwise. */
	if (mnl_attr_get_type(a) == IFA_LOCAL || (mnl_attr_get_type(a) == IFA_ADDRESS && *addr == NULL))
		*addr = mnl_attr_get_payload(a);
	return MNL_CB_OK;
}

static int
addr_answer(const struct nlmsghdr *h, void *data)
{
	struct addr_dump *ad = data;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
	struct ncd_host_addrs *out = ad->out;
	const uint8_t *addr = NULL;

	if (h->nlmsg_type != RTM_NEWADDR || (int)ifa->ifa_index != ad->ifindex ||
	    (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6) ||
	    out->n == NCD_HOST_ADDRS)
		return MNL_CB_OK;
	mnl_attr_parse(h, sizeof(*ifa), addr_attr, &addr);
	if (addr == NULL)
		return MNL_CB_OK;
	memset(&out->addr[out->n], 0, sizeof(out->addr[0]));
	out->addr[out->n].family = ifa->ifa_family == AF_INET ? NC_TRIE_AF_INET : NC_TRIE_AF_INET6;
	memcpy(out->addr[out->n].a.a, addr, ifa->ifa_family == AF_INET ? 4 : 16);
	out->n++;
	return MNL_CB_OK;
}

/*
 * A port's kernel interface's addresses, read again: published to the
 * workers (ncd_host_addr()) only when they changed, into the copy they do
 * not read.
 */
static void
host_addrs_refresh(struct ncd_port *p)
{
	uint8_t buf[NL_BUF];
	struct ifaddrmsg *ifa;
	struct nlmsghdr *n = nl_request(buf, RTM_GETADDR, NLM_F_DUMP, sizeof(*ifa), (void **)&ifa);
	uint32_t cur = p->host_cur;
	struct ncd_host_addrs fresh;
	struct addr_dump ad = { .ifindex = p->nh_ifindex, .out = &fresh };

	/* Zeroed whole, padding too: lists are compared with memcmp(). */
	memset(&fresh, 0, sizeof(fresh));
	ifa->ifa_family = AF_UNSPEC;
	if (nl_call(n, addr_answer, &ad) != 0 || memcmp(&fresh, &p->host[cur], sizeof(fresh)) == 0)
		return;
	p->host[cur ^ 1] = fresh;
	/* Release: a worker that reads the new index reads the whole list. */
	__atomic_store_n(&p->host_cur, cur ^ 1, __ATOMIC_RELEASE);
}

bool
ncd_host_addr(const struct ncd_port *p, const struct nc_trie_key *k)
{
	const struct ncd_host_addrs *h;

	if (p->nh_ifindex == 0)
		return true;
	h = &p->host[__atomic_load_n(&p->host_cur, __ATOMIC_ACQUIRE)];
	for (uint32_t i = 0; i < h->n; i++)
		if (h->addr[i].family == k->family &&
		    memcmp(h->addr[i].a.a, k->src.a, k->family == NC_TRIE_AF_INET ? 4 : 16) == 0)
			return true;
	return false;
}

void
ncd_nh_run(struct ncd *d)
{
	struct rte_mbuf *m[NCD_BURST];
	uint8_t ev[NL_BUF];
	bool changed = false;
	unsigned int n;
	uint64_t v;

	if (d->nh_efd >= 0 && read(d->nh_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		NCD_LOG(DEBUG, "read(next-hop eventfd): %s", strerror(errno));
	while (d->nh_req != NULL &&
	       (n = rte_ring_dequeue_burst(d->nh_req, (void **)m, NCD_BURST, NULL)) > 0) {
		for (unsigned int i = 0; i < n; i++)
			resolve_one(d, m[i]);
	}
	wait_run(d);
	/*
	 * The host's addresses, which clients may send from: read again when the
	 * kernel says an address or a link changed (any interface's: the message
	 * is not parsed), and every second.
	 */
	while (nl_events != NULL && recv(mnl_socket_get_fd(nl_events), ev, sizeof(ev), 0) > 0)
		changed = true;
	/* An interface went, came or changed: ncd_ports_watch() looks at the links at once. */
	for (unsigned int i = 0; changed && i < d->cfg.nports; i++)
		d->ports[i].link.event = 1;
	for (unsigned int i = 0; nl != NULL && i < d->cfg.nports; i++) {
		struct ncd_port *p = &d->ports[i];
		uint64_t now = ncd_now_ms();

		if (p->nh_ifindex != 0 && (changed || now - p->host_read_ms >= 1000)) {
			p->host_read_ms = now;
			host_addrs_refresh(p);
		}
	}
	if (nl != NULL)
		ncd_host_keep_run(d, changed, ncd_now_ms());
}

void
ncd_nh_close(struct ncd *d)
{
	struct rte_mbuf *m;

	while (d->nh_req != NULL && rte_ring_dequeue(d->nh_req, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	for (unsigned int i = 0; i < NH_WAIT_MAX; i++) {
		rte_pktmbuf_free(waiting[i].m);
		waiting[i].m = NULL;
	}
	rte_ring_free(d->nh_req);
	d->nh_req = NULL;
	for (unsigned int w = 0; w < NCD_MAX_WORKERS; w++) {
		while (nh_done[w] != NULL && rte_ring_dequeue(nh_done[w], (void **)&m) == 0)
			rte_pktmbuf_free(m);
		rte_ring_free(nh_done[w]);
		nh_done[w] = NULL;
	}
	if (d->nh_efd >= 0)
		close(d->nh_efd);
	d->nh_efd = -1;
	ncd_host_keep_close();
	if (nl != NULL)
		mnl_socket_close(nl);
	nl = NULL;
	if (nl_events != NULL)
		mnl_socket_close(nl_events);
	nl_events = NULL;
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		rte_free(d->ports[i].nh);
		d->ports[i].nh = NULL;
	}
}

/* Packets workers handed over for next-hop resolution still name the channel: settled now. */
static void
channel_quiet(struct ncd *d, struct ncd_channel *ch)
{
	if (ch->tx != NULL || ch->action == NC_ACTION_NAT)
		ncd_nh_run(d);
}

const struct ncd_channel_hooks ncd_nh_channel_hooks = {
	.quiet = channel_quiet,
};
