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
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_nexthop
#include "channel/channel.h"
#include "datapath/datapath.h"
#include "ncd.h"
#include "port/port.h"

#define NL_TIMEOUT_MS 200
#define NH_REQ_RING 1024

static int nl_fd = -1;
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

static void
nl_attr(struct nlmsghdr *n, size_t max, uint16_t type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)n + NLMSG_ALIGN(n->nlmsg_len));

	if (NLMSG_ALIGN(n->nlmsg_len) + RTA_SPACE(len) > max)
		return;
	a->rta_type = type;
	a->rta_len = (uint16_t)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	n->nlmsg_len = (uint32_t)(NLMSG_ALIGN(n->nlmsg_len) + RTA_SPACE(len));
}

/* Send a request and wait for its answer. Returns the answer's length, or -errno. */
static int
nl_call(struct nlmsghdr *req, void *buf, size_t size)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	req->nlmsg_seq = ++nl_seq;
	if (sendto(nl_fd, req, req->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(nl_fd, buf, size, 0);
		struct nlmsghdr *h = buf;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n < (ssize_t)sizeof(*h) || !NLMSG_OK(h, (uint32_t)n))
			return -EBADMSG;
		if (h->nlmsg_seq != nl_seq)
			continue;              /* a late answer to an earlier request */
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			return e->error;       /* 0: an ACK */
		}
		return (int)n;
	}
}

/* The kernel's route to dst: its interface, and the gateway if there is one. */
static int
route_get(uint8_t family, const uint8_t *dst, int *oif, uint8_t *gw, bool *has_gw)
{
	struct {
		struct nlmsghdr n;
		struct rtmsg r;
		char attrs[64];
	} req = { .n = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)),
			 .nlmsg_type = RTM_GETROUTE, .nlmsg_flags = NLM_F_REQUEST } };
	size_t alen = family == 4 ? 4 : 16;
	uint8_t buf[4096];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct rtattr *a;
	int n, len;

	req.r.rtm_family = family == 4 ? AF_INET : AF_INET6;
	req.r.rtm_dst_len = (uint8_t)(alen * 8);
	nl_attr(&req.n, sizeof(req), RTA_DST, dst, alen);
	n = nl_call(&req.n, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (h->nlmsg_type != RTM_NEWROUTE)
		return -EBADMSG;
	*oif = 0;
	*has_gw = false;
	len = (int)RTM_PAYLOAD(h);
	for (a = RTM_RTA(NLMSG_DATA(h)); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int))
			memcpy(oif, RTA_DATA(a), sizeof(int));
		else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == alen) {
			memcpy(gw, RTA_DATA(a), alen);
			*has_gw = true;
		}
	}
	return 0;
}

/* The neighbour entry of addr on ifindex: 1 usable (mac set), 0 unresolved, or -errno. */
static int
neigh_get(uint8_t family, int ifindex, const uint8_t *addr, uint8_t mac[6])
{
	struct {
		struct nlmsghdr n;
		struct ndmsg nd;
		char attrs[64];
	} req = { .n = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg)),
			 .nlmsg_type = RTM_GETNEIGH, .nlmsg_flags = NLM_F_REQUEST } };
	size_t alen = family == 4 ? 4 : 16;
	uint8_t buf[1024];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	const struct ndmsg *nd;
	struct rtattr *a;
	bool has_mac = false;
	int n, len;

	req.nd.ndm_family = family == 4 ? AF_INET : AF_INET6;
	req.nd.ndm_ifindex = ifindex;
	nl_attr(&req.n, sizeof(req), NDA_DST, addr, alen);
	n = nl_call(&req.n, buf, sizeof(buf));
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return n;
	if (h->nlmsg_type != RTM_NEWNEIGH)
		return -EBADMSG;
	nd = NLMSG_DATA(h);
	len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*nd)));
	for (a = (struct rtattr *)((char *)nd + NLMSG_ALIGN(sizeof(*nd))); RTA_OK(a, len);
	     a = RTA_NEXT(a, len))
		if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
			memcpy(mac, RTA_DATA(a), 6);
			has_mac = true;
		}
	/* What the kernel itself would send to: confirmed, or stale but not failed. */
	return has_mac && (nd->ndm_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE |
					    NUD_PERMANENT | NUD_NOARP)) ? 1 : 0;
}

/* Ask the kernel to resolve addr (as `ip neigh replace ADDR dev IF use` does). */
static void
neigh_use(uint8_t family, int ifindex, const uint8_t *addr)
{
	struct {
		struct nlmsghdr n;
		struct ndmsg nd;
		char attrs[64];
	} req = { .n = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg)),
			 .nlmsg_type = RTM_NEWNEIGH,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE } };
	uint8_t buf[1024];

	req.nd.ndm_family = family == 4 ? AF_INET : AF_INET6;
	req.nd.ndm_ifindex = ifindex;
	req.nd.ndm_state = NUD_NONE;
	req.nd.ndm_flags = NTF_USE;
	nl_attr(&req.n, sizeof(req), NDA_DST, addr, family == 4 ? 4 : 16);
	nl_call(&req.n, buf, sizeof(buf));
}

/* Ask the kernel for dst's next hop out of port p: 1 (mac set), -ENETUNREACH, -EHOSTUNREACH. */
static int
ask_kernel(struct ncd_port *p, uint8_t family, const uint8_t *dst, uint8_t mac[6])
{
	uint8_t gw[16], hop[16];
	bool has_gw;
	int oif, ret;

	if (p->nh_ifindex == 0 || nl_fd < 0)
		return -ENETUNREACH;
	memset(hop, 0, sizeof(hop));
	ret = route_get(family, dst, &oif, gw, &has_gw);
	/* A route out of another interface is not this port's to take. */
	if (ret != 0 || oif != p->nh_ifindex)
		return -ENETUNREACH;
	memcpy(hop, has_gw ? gw : dst, family == 4 ? 4 : 16);
	ret = neigh_get(family, oif, hop, mac);
	if (ret <= 0) {
		/* Resolve it for the packets to come; this one is lost, as the kernel's would be. */
		neigh_use(family, oif, hop);
		return -EHOSTUNREACH;
	}
	return 1;
}

/* Resolve dst out of port pi, through the cache: 1 (mac set), -ENETUNREACH, -EHOSTUNREACH. */
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
	/* Failures are cached briefly, so a flood of them does not become a flood of requests. */
	nh_put(p->nh, family, dst, ret, mac, now + ms * (ret == 1 ? NCD_NH_TTL_MS : NCD_NH_NEG_TTL_MS));
	return ret;
}

int
ncd_nh_init(struct ncd *d)
{
	struct timeval tv = { .tv_usec = NL_TIMEOUT_MS * 1000 };
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

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
			p->nh_ifindex = (int)info.if_index;
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
		d->workers[w].nh_done = rte_ring_create(name, NH_REQ_RING, (int)rte_socket_id(),
							RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (d->workers[w].nh_done == NULL) {
			NCD_LOG(ERR, "rte_ring_create(%s): %s", name, rte_strerror(rte_errno));
			return -1;
		}
	}
	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl_fd < 0 || bind(nl_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		/* Frames still go out; IP packets will find no route. */
		NCD_LOG(WARNING, "netlink socket: %s: clients' IP packets cannot be routed",
			strerror(errno));
		if (nl_fd >= 0)
			close(nl_fd);
		nl_fd = -1;
		return 0;
	}
	setsockopt(nl_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return 0;
}

/* A worker with a tx queue on port op, to send a resolved NAT packet: -1 if none. */
static int
sender_of(const struct ncd *d, uint16_t op)
{
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		if (d->workers[w].txq[op] != NCD_NO_TXQ)
			return (int)w;
	return -1;
}

/*
 * One packet a worker handed over: a client's IP packet (out of its
 * channel's port), or a NAT channel's translated one (out of the NAT's port,
 * or the one it came in on, m->port). Its frame is built and checked; only
 * its destination MAC is missing.
 */
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

	if (ch == NULL || (nat ? ch->action != NC_ACTION_NAT : ch->tx == NULL) ||
	    ncd_parse(f, want, m->pkt_len, NULL, NCD_PARSE_CSUM_GOOD, &pp) != NCD_PKT_OK) {
		/* Its channel went meanwhile. */
		if (ps != NULL)
			ps->drop_nat_tx++;
		rte_pktmbuf_free(m);
		return;
	}
	op = !nat ? ch->port : ch->nat.has_port ? ch->nat.port : m->port;
	w = nat ? sender_of(d, op) : (int)ch->tx_worker;
	ret = resolve(d, op, pp.key.family, pp.key.dst.a, eh->dst_addr.addr_bytes);
	/* The generation tells the worker whether the channel is still this one. */
	m->hash.fdir.hi = (uint32_t)ch->dir->generation;
	if (ret == 1 && w >= 0 && rte_ring_sp_enqueue(d->workers[w].nh_done, m) == 0)
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

void
ncd_nh_run(struct ncd *d)
{
	struct rte_mbuf *m[NCD_BURST];
	unsigned int n;
	uint64_t v;

	if (d->nh_efd >= 0 && read(d->nh_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		NCD_LOG(DEBUG, "read(next-hop eventfd): %s", strerror(errno));
	while (d->nh_req != NULL &&
	       (n = rte_ring_dequeue_burst(d->nh_req, (void **)m, NCD_BURST, NULL)) > 0) {
		for (unsigned int i = 0; i < n; i++)
			resolve_one(d, m[i]);
	}
}

void
ncd_nh_close(struct ncd *d)
{
	struct rte_mbuf *m;

	while (d->nh_req != NULL && rte_ring_dequeue(d->nh_req, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	rte_ring_free(d->nh_req);
	d->nh_req = NULL;
	for (unsigned int w = 0; d->workers != NULL && w < d->cfg.nworkers; w++) {
		while (d->workers[w].nh_done != NULL &&
		       rte_ring_dequeue(d->workers[w].nh_done, (void **)&m) == 0)
			rte_pktmbuf_free(m);
		rte_ring_free(d->workers[w].nh_done);
		d->workers[w].nh_done = NULL;
	}
	if (d->nh_efd >= 0)
		close(d->nh_efd);
	d->nh_efd = -1;
	if (nl_fd >= 0)
		close(nl_fd);
	nl_fd = -1;
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		rte_free(d->ports[i].nh);
		d->ports[i].nh = NULL;
	}
}
