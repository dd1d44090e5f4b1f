/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host's configuration of a TAP kept across its recreation and the
 * daemon's restarts (exception.host "keep", the default without an
 * exception.host object). The kernel forgets a TAP's addresses and routes
 * with the TAP, which goes whenever the daemon does; so what an
 * administrator puts on it (permanent addresses, routes of proto static or
 * boot in the main table, its MTU, its admin state) is written to a state
 * file under state_dir as it changes, in exception.host's own schema, and
 * given back to the TAP whenever the daemon makes it. What the kernel or a
 * manager makes (DHCP, SLAAC and temporary addresses, link-local ones,
 * routes of proto kernel or ra) is not kept: they come back by themselves.
 *
 * The state is read from the kernel after its changes settle (100 ms of no
 * netlink event), and only while the TAP the daemon last made is there: a
 * TAP being deleted loses its addresses first, and that is not the admin's
 * wish. A state of nothing to keep is no file.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <jansson.h>
#include <libmnl/libmnl.h>

#define NCD_LOGTYPE ncd_logtype_nexthop
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "nexthop/nl.h"
#include "port/port.h"

#define SETTLE_MS 100
#define REREAD_MS 5000

/* What the daemon knows of each port's kept state. */
static struct keep {
	int ifindex;            /* the TAP it restored (or found nothing for): read only this one */
	uint16_t mtu0;          /* the MTU the TAP was made with: not worth keeping alone */
	uint64_t due_ms;        /* read the kernel's state then (0: when REREAD_MS has passed) */
	uint64_t read_ms;
	json_t *last;           /* what the file holds, or NULL (no file) */
} keep[NCD_MAX_PORTS];

/* The state of a TAP, read from the kernel. */
struct state {
	int ifindex;
	bool found, up;
	uint32_t mtu;
	struct ncd_host_conf hc;
	unsigned int dropped;   /* more than NCD_HOST_MAX addresses or routes: not kept */
};

bool
ncd_host_keeps(const struct ncd *d, unsigned int pi)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[pi];

	return d->ports[pi].has_exc && !pc->has_host && !pc->host_manager &&
	       pc->exc_device != NULL && strstr(pc->exc_device, "iface=") != NULL;
}

static void
state_path(const struct ncd *d, unsigned int pi, char *buf, size_t n)
{
	snprintf(buf, n, "%s/host.%s.%s.json", d->cfg.state_dir, d->file_prefix,
		 d->cfg.ports[pi].name);
}

static int
link_answer(const struct nlmsghdr *h, void *data)
{
	struct state *st = data;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(h);
	const struct nlattr *a;

	if (h->nlmsg_type != RTM_NEWLINK || ifi->ifi_index != st->ifindex)
		return MNL_CB_OK;
	st->found = true;
	st->up = ifi->ifi_flags & IFF_UP;
	mnl_attr_for_each(a, h, sizeof(*ifi))
		if (mnl_attr_get_type(a) == IFLA_MTU)
			st->mtu = mnl_attr_get_u32(a);
	return MNL_CB_OK;
}

static int
addr_answer(const struct nlmsghdr *h, void *data)
{
	struct state *st = data;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
	const uint8_t *addr = NULL, *local = NULL;
	uint32_t flags = ifa->ifa_flags;
	const struct nlattr *a;
	struct ncd_host_addr *x;

	if (h->nlmsg_type != RTM_NEWADDR || (int)ifa->ifa_index != st->ifindex ||
	    (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6))
		return MNL_CB_OK;
	mnl_attr_for_each(a, h, sizeof(*ifa)) {
		if (mnl_attr_get_type(a) == IFA_ADDRESS)
			addr = mnl_attr_get_payload(a);
		else if (mnl_attr_get_type(a) == IFA_LOCAL)
			local = mnl_attr_get_payload(a);
		else if (mnl_attr_get_type(a) == IFA_FLAGS)
			flags = mnl_attr_get_u32(a);
	}
	if (local != NULL)
		addr = local;
	/*
	 * The admin's: permanent (no lifetime, so not DHCP's nor SLAAC's), not a
	 * privacy address, of global scope (not link-local).
	 */
	if (addr == NULL || !(flags & IFA_F_PERMANENT) ||
	    (flags & (IFA_F_TEMPORARY | IFA_F_DADFAILED)) || ifa->ifa_scope != RT_SCOPE_UNIVERSE)
		return MNL_CB_OK;
	if (st->hc.naddr == NCD_HOST_MAX) {
		st->dropped++;
		return MNL_CB_OK;
	}
	x = &st->hc.addr[st->hc.naddr++];
	memset(x, 0, sizeof(*x));
	x->family = ifa->ifa_family == AF_INET ? NC_TRIE_AF_INET : NC_TRIE_AF_INET6;
	x->len = ifa->ifa_prefixlen;
	memcpy(x->a.a, addr, ifa->ifa_family == AF_INET ? 4 : 16);
	return MNL_CB_OK;
}

static int
route_answer(const struct nlmsghdr *h, void *data)
{
	struct state *st = data;
	const struct rtmsg *rt = mnl_nlmsg_get_payload(h);
	const uint8_t *dst = NULL, *gw = NULL;
	uint32_t table = rt->rtm_table, metric = 0;
	int oif = 0;
	bool multipath = false;
	const struct nlattr *a;
	struct ncd_host_route *x;
	size_t alen = rt->rtm_family == AF_INET ? 4 : 16;

	if (h->nlmsg_type != RTM_NEWROUTE ||
	    (rt->rtm_family != AF_INET && rt->rtm_family != AF_INET6))
		return MNL_CB_OK;
	mnl_attr_for_each(a, h, sizeof(*rt)) {
		switch (mnl_attr_get_type(a)) {
		case RTA_DST: dst = mnl_attr_get_payload(a); break;
		case RTA_GATEWAY: gw = mnl_attr_get_payload(a); break;
		case RTA_OIF: oif = (int)mnl_attr_get_u32(a); break;
		case RTA_PRIORITY: metric = mnl_attr_get_u32(a); break;
		case RTA_TABLE: table = mnl_attr_get_u32(a); break;
		case RTA_MULTIPATH: multipath = true; break;
		default: break;
		}
	}
	/* The admin's: static or boot (ip route's default), unicast, in main, through the TAP alone. */
	if (oif != st->ifindex || multipath || table != RT_TABLE_MAIN ||
	    rt->rtm_type != RTN_UNICAST ||
	    (rt->rtm_protocol != RTPROT_STATIC && rt->rtm_protocol != RTPROT_BOOT))
		return MNL_CB_OK;
	if (st->hc.nroute == NCD_HOST_MAX) {
		st->dropped++;
		return MNL_CB_OK;
	}
	x = &st->hc.route[st->hc.nroute++];
	memset(x, 0, sizeof(*x));
	x->dst.family = rt->rtm_family == AF_INET ? NC_TRIE_AF_INET : NC_TRIE_AF_INET6;
	x->dst.len = rt->rtm_dst_len;
	if (dst != NULL)
		memcpy(x->dst.a.a, dst, alen);
	if (gw != NULL) {
		memcpy(x->gw.a, gw, alen);
		x->has_gw = true;
	}
	x->metric = metric;
	return MNL_CB_OK;
}

/* The TAP's state as the kernel has it. @return 0, or -errno (-ENODEV: it is not there). */
static int
state_read(int ifindex, struct state *st)
{
	uint8_t buf[NCD_NL_BUF];
	struct nlmsghdr *n;
	void *hdr;
	int ret;

	memset(st, 0, sizeof(*st));
	st->ifindex = ifindex;
	n = ncd_nl_request(buf, RTM_GETLINK, 0, sizeof(struct ifinfomsg), &hdr);
	((struct ifinfomsg *)hdr)->ifi_index = ifindex;
	ret = ncd_nl_call(n, link_answer, st);
	if (ret != 0 || !st->found)
		return ret != 0 ? ret : -ENODEV;
	n = ncd_nl_request(buf, RTM_GETADDR, NLM_F_DUMP, sizeof(struct ifaddrmsg), &hdr);
	((struct ifaddrmsg *)hdr)->ifa_family = AF_UNSPEC;
	ret = ncd_nl_call(n, addr_answer, st);
	for (int f = 0; ret == 0 && f < 2; f++) {
		n = ncd_nl_request(buf, RTM_GETROUTE, NLM_F_DUMP, sizeof(struct rtmsg), &hdr);
		((struct rtmsg *)hdr)->rtm_family = f ? AF_INET6 : AF_INET;
		ret = ncd_nl_call(n, route_answer, st);
	}
	return ret;
}

static json_t *
prefix_json(uint8_t family, const union nc_trie_addr *a, unsigned int len)
{
	char s[INET6_ADDRSTRLEN + 8];

	inet_ntop(family == NC_TRIE_AF_INET ? AF_INET : AF_INET6, a->a, s, sizeof(s));
	snprintf(s + strlen(s), sizeof(s) - strlen(s), "/%u", len);
	return json_string(s);
}

/* The state as the file has it (exception.host's schema under "host"), or NULL: nothing to keep. */
static json_t *
state_json(const struct ncd *d, unsigned int pi, const struct state *st)
{
	json_t *addrs = json_array(), *routes = json_array(), *host;

	if (st->hc.naddr == 0 && st->hc.nroute == 0 && st->up && st->mtu == keep[pi].mtu0) {
		json_decref(addrs);
		json_decref(routes);
		return NULL;
	}
	for (unsigned int i = 0; i < st->hc.naddr; i++)
		json_array_append_new(addrs, prefix_json(st->hc.addr[i].family, &st->hc.addr[i].a,
							 st->hc.addr[i].len));
	for (unsigned int i = 0; i < st->hc.nroute; i++) {
		const struct ncd_host_route *r = &st->hc.route[i];
		json_t *o = json_pack("{s:o, s:I}", "dst",
				      prefix_json(r->dst.family, &r->dst.a, r->dst.len),
				      "metric", (json_int_t)r->metric);

		if (r->has_gw) {
			char g[INET6_ADDRSTRLEN];

			inet_ntop(r->dst.family == NC_TRIE_AF_INET ? AF_INET : AF_INET6, r->gw.a, g,
				  sizeof(g));
			json_object_set_new(o, "gateway", json_string(g));
		}
		json_array_append_new(routes, o);
	}
	host = json_pack("{s:o, s:o, s:I}", "addresses", addrs, "routes", routes, "mtu",
			 (json_int_t)st->mtu);
	return json_pack("{s:s, s:b, s:o}", "port", d->cfg.ports[pi].name, "up", st->up,
			 "host", host);
}

/* Write (or remove) the state file: a new file renamed over the old, never half of one. */
static int
state_write(const struct ncd *d, unsigned int pi, const json_t *j)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];

	state_path(d, pi, path, sizeof(path));
	if (j == NULL)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
	if (mkdir(d->cfg.state_dir, 0755) != 0 && errno != EEXIST)
		return -errno;
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	if (json_dump_file(j, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) != 0)
		return -EIO;
	if (rename(tmp, path) != 0) {
		int e = errno;

		unlink(tmp);
		return -e;
	}
	return 0;
}

/* Read the TAP's state and keep it if it changed. */
static void
keep_one(struct ncd *d, unsigned int pi)
{
	struct keep *k = &keep[pi];
	char path[PATH_MAX];
	struct state st;
	json_t *j;
	int ret;

	if (k->ifindex == 0 || k->ifindex != d->ports[pi].exc_ifindex)
		return;
	ret = state_read(k->ifindex, &st);
	if (ret != 0) {
		if (ret != -ENODEV)
			NCD_LOG(WARNING, "port %s: reading the TAP's addresses and routes to keep "
				"them: %s", d->cfg.ports[pi].name, strerror(-ret));
		return;
	}
	j = state_json(d, pi, &st);
	if ((j == NULL && k->last == NULL) || (j != NULL && k->last != NULL && json_equal(j, k->last))) {
		json_decref(j);
		return;
	}
	state_path(d, pi, path, sizeof(path));
	ret = state_write(d, pi, j);
	if (ret != 0) {
		NCD_LOG(ERR, "port %s: keeping the TAP's configuration in %s: %s",
			d->cfg.ports[pi].name, path, strerror(-ret));
		json_decref(j);
		return;
	}
	if (st.dropped > 0)
		NCD_LOG(WARNING, "port %s: %u of the TAP's addresses and routes are past the %d of "
			"each kept", d->cfg.ports[pi].name, st.dropped, NCD_HOST_MAX);
	NCD_LOG(INFO, "port %s: kept the TAP's configuration (%u addresses, %u routes, mtu %u, %s) "
		"in %s", d->cfg.ports[pi].name, st.hc.naddr, st.hc.nroute, st.mtu,
		st.up ? "up" : "down", path);
	json_decref(k->last);
	k->last = j;
}

void
ncd_host_keep_run(struct ncd *d, bool changed, uint64_t now)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		struct keep *k = &keep[pi];

		if (!ncd_host_keeps(d, pi) || k->ifindex == 0)
			continue;
		if (changed)
			k->due_ms = now + SETTLE_MS;
		if ((k->due_ms != 0 && now >= k->due_ms) ||
		    (k->due_ms == 0 && now - k->read_ms >= REREAD_MS)) {
			k->due_ms = 0;
			k->read_ms = now;
			keep_one(d, pi);
		}
	}
}

int
ncd_host_keep_restore(struct ncd *d, unsigned int pi)
{
	const char *name = d->cfg.ports[pi].name;
	struct keep *k = &keep[pi];
	int ifindex = d->ports[pi].exc_ifindex;
	struct ncd_host_conf hc;
	char path[PATH_MAX];
	json_error_t jerr;
	struct state st;
	json_t *j;
	int ret;

	k->ifindex = 0;
	k->due_ms = 0;
	json_decref(k->last);
	k->last = NULL;
	if (d->cfg.ports[pi].host_manager && ifindex != 0)
		NCD_LOG(NOTICE, "port %s: exception.host is \"manager\": the TAP's addresses, routes "
			"and MTU are left to it, neither kept nor restored", name);
	if (!ncd_host_keeps(d, pi) || ifindex == 0)
		return 0;
	/* As made: its MTU is the baseline of what is worth keeping. */
	if (state_read(ifindex, &st) == 0)
		k->mtu0 = (uint16_t)st.mtu;
	state_path(d, pi, path, sizeof(path));
	j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	k->ifindex = ifindex;
	k->read_ms = ncd_now_ms();
	if (j == NULL) {
		if (access(path, F_OK) == 0)
			NCD_LOG(ERR, "port %s: the TAP's kept configuration %s:%d:%d: %s: not restored",
				name, path, jerr.line, jerr.column, jerr.text);
		return access(path, F_OK) == 0 ? -1 : 0;
	}
	if (!json_is_object(j) || !json_is_boolean(json_object_get(j, "up")) ||
	    ncd_host_conf_load(path, json_object_get(j, "host"), &hc) != 0) {
		NCD_LOG(ERR, "port %s: the TAP's kept configuration %s is not what netchanneld "
			"writes (see above): not restored", name, path);
		json_decref(j);
		return -1;
	}
	ret = ncd_host_apply(d, pi, &hc, json_is_true(json_object_get(j, "up")), "kept in", path);
	/* What the file held is what the TAP has now: the next change writes it again. */
	k->last = j;
	return ret;
}

void
ncd_host_keep_close(void)
{
	for (unsigned int pi = 0; pi < NCD_MAX_PORTS; pi++) {
		json_decref(keep[pi].last);
		memset(&keep[pi], 0, sizeof(keep[pi]));
	}
}
