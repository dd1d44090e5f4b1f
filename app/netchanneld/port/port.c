/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ports and their exception devices. Each worker that polls a port gets
 * index k among that port's workers: it transmits on tx queue k of the port
 * and of the exception device, and polls rx queue k of the exception device
 * (a multi-queue TAP spreads the kernel's frames over its queues).
 */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include "ncd.h"
#include "port/port.h"

struct ncd_port ncd_port_table[NCD_MAX_PORTS];
static struct ncd_port_hooks hooks;

void
ncd_ports_hooks_set(const struct ncd_port_hooks *h)
{
	hooks = *h;
}

#define NB_DESC 1024

/* A config error found only once the device is known: exit code 2. */
#define CONF_ERR(d, i, field, fmt, ...) \
	(fprintf(stderr, "%s: ports[%u].%s: " fmt "\n", (d)->cfg.path, (i), field, ##__VA_ARGS__), 2)

/* Probe a device string and return its port id, or -1. */
static int
probe(const char *devargs, uint16_t *port_id)
{
	char name[RTE_DEV_NAME_MAX_LEN];
	const char *comma = strchr(devargs, ',');
	size_t n = comma ? (size_t)(comma - devargs) : strlen(devargs);
	int ret;

	if (n >= sizeof(name))
		return -ENAMETOOLONG;
	memcpy(name, devargs, n);
	name[n] = '\0';
	/* A PCI device EAL has probed already answers -EEXIST: that is fine. */
	ret = rte_dev_probe(devargs);
	if (ret < 0 && ret != -EEXIST)
		return ret;
	return rte_eth_dev_get_port_by_name(name, port_id) == 0 ? 0 : -ENODEV;
}

/* Whether a worker polls one of the port's rx queues. */
static bool
polls(const struct ncd_worker_conf *wc, unsigned int p)
{
	for (unsigned int i = 0; i < wc->nrx; i++)
		if (wc->rx[i].port == p)
			return true;
	return false;
}

static unsigned int
workers_of_port(const struct ncd *d, unsigned int p)
{
	unsigned int n = 0;

	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		n += polls(&d->cfg.workers[w], p);
	return n;
}

/* Whether a worker that may sleep (workers[].idle not poll) polls port p. */
static bool
sleeper_polls(const struct ncd *d, unsigned int p)
{
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		if (d->cfg.workers[w].idle != NCD_IDLE_POLL && polls(&d->cfg.workers[w], p))
			return true;
	return false;
}

static int
setup_queues(struct ncd *d, uint16_t pid, const char *what, uint16_t nrx, uint16_t ntx,
	     uint16_t mtu, bool rss, bool *ip_csum, bool rxq_intr)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nrxd = NB_DESC, ntxd = NB_DESC;
	int ret;

	memset(&conf, 0, sizeof(conf));
	ret = rte_eth_dev_info_get(pid, &info);
	if (ret != 0) {
		NCD_LOG(ERR, "rte_eth_dev_info_get(%s): %s", what, strerror(-ret));
		return -1;
	}
	if (rss && nrx > 1 && info.flow_type_rss_offloads != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf =
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
	}
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	/* Only NAT's packets ask for it, with their mbuf's flags. */
	if (ip_csum != NULL && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)) {
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
		*ip_csum = true;
	}
	if (mtu >= info.min_mtu && mtu <= info.max_mtu)
		conf.rxmode.mtu = mtu;
	/* Link changes and removal as events, where the PMD has them (ncd_ports_watch()). */
	if (info.dev_flags != NULL && (*info.dev_flags & RTE_ETH_DEV_INTR_LSC))
		conf.intr_conf.lsc = 1;
	if (info.dev_flags != NULL && (*info.dev_flags & RTE_ETH_DEV_INTR_RMV))
		conf.intr_conf.rmv = 1;
	/* A worker that sleeps waits on the queues' interrupt fds (ncd_rxq_wake_fd()). */
	if (rxq_intr && ncd_rxq_intr_wanted(info.driver_name))
		conf.intr_conf.rxq = 1;
	ret = rte_eth_dev_configure(pid, nrx, ntx, &conf);
	if (ret == 0)
		ret = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrxd, &ntxd);
	if (ret != 0) {
		NCD_LOG(ERR, "rte_eth_dev_configure(%s, %u rx, %u tx): %s", what, nrx, ntx,
			strerror(-ret));
		return -1;
	}
	for (uint16_t q = 0; q < nrx; q++) {
		ret = rte_eth_rx_queue_setup(pid, q, nrxd, rte_eth_dev_socket_id(pid), NULL, d->pool);
		if (ret != 0) {
			NCD_LOG(ERR, "rte_eth_rx_queue_setup(%s, %u): %s", what, q, strerror(-ret));
			return -1;
		}
	}
	for (uint16_t q = 0; q < ntx; q++) {
		ret = rte_eth_tx_queue_setup(pid, q, ntxd, rte_eth_dev_socket_id(pid), NULL);
		if (ret != 0) {
			NCD_LOG(ERR, "rte_eth_tx_queue_setup(%s, %u): %s", what, q, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

/* The exception device's devargs: a TAP carries the port's MAC, so the kernel answers ARP. */
static void
exc_devargs(const struct ncd_port_conf *pc, const struct ncd_port *p, char *exc, size_t len)
{
	snprintf(exc, len, "%s", pc->exc_device);
	if (strncmp(exc, "net_tap", 7) == 0 && strstr(exc, "mac=") == NULL) {
		struct rte_ether_addr m = p->mac;
		char mac[RTE_ETHER_ADDR_FMT_SIZE];

		if (!pc->exc_mac_port)
			memcpy(m.addr_bytes, pc->exc_mac, sizeof(m.addr_bytes));
		rte_ether_format_addr(mac, sizeof(mac), &m);
		if (pc->exc_mac_port || pc->exc_mac_set)
			snprintf(exc + strlen(exc), len - strlen(exc), ",mac=%s", mac);
	}
}

/*
 * A net_af_xdp port, before it is probed: what a daemon that died in
 * exception mode xdp left on the interface (its XDP program, which kept
 * the host online) is taken off, since net_af_xdp will not attach over a
 * program that is there; the device's lock (ncd_ports_claim()) says no
 * live daemon uses it. Another program is left alone; in mode xdp the
 * start then fails, in mode tap net_af_xdp decides. In mode xdp the
 * device's arguments get the program to load (xdp_prog=). @return 0, or 1
 * (logged)
 */
static int
xdp_takeover(struct ncd *d, unsigned int i, char *dev, size_t len)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[i];
	struct ncd_port *p = &d->ports[i];
	char iface[IF_NAMESIZE] = "", other[64];
	unsigned int idx;
	int ret;

	p->xdp_maps.claims_fd = p->xdp_maps.stats_fd = -1;
	if (strncmp(pc->device, "net_af_xdp", 10) != 0 ||
	    !ncd_devargs_iface(pc->device, iface, sizeof(iface)))
		return 0;
	idx = if_nametoindex(iface);
	if (idx == 0 && pc->xdp) {
		NCD_LOG(ERR, "port %s: exception mode xdp: no interface '%s' in this network "
			"namespace", pc->name, iface);
		return 1;
	}
	if (idx == 0)
		return 0;
	ret = ncd_xdp_detach(idx, other, sizeof(other));
	if (ret == -EEXIST && pc->xdp) {
		NCD_LOG(ERR, "port %s: exception mode xdp: %s has an XDP program that is not "
			"netchanneld's (%s): take it off first (ip link set dev %s xdp off)",
			pc->name, iface, other, iface);
		return 1;
	}
	if (ret < 0 && ret != -EEXIST && ret != -ENOTSUP) {
		NCD_LOG(ERR, "port %s: taking a dead daemon's XDP program off %s: %s", pc->name,
			iface, strerror(-ret));
		return 1;
	}
	if (ret == 1)
		NCD_LOG(NOTICE, "port %s: took %s over from a netchanneld that is gone: its XDP "
			"program, which passed the host its traffic meanwhile, is taken off",
			pc->name, iface);
	p->xdp_took_over = ret == 1;
	if (!pc->xdp)
		return 0;
	p->xdp_ifindex = (int)idx;
	if ((size_t)snprintf(dev, len, "%s,xdp_prog=%s", pc->device, pc->xdp_prog) >= len) {
		NCD_LOG(ERR, "port %s: device arguments too long with xdp_prog=%s", pc->name,
			pc->xdp_prog);
		return 1;
	}
	return 0;
}

/* Exception mode xdp, once net_af_xdp has attached the program: its maps. @return 0 or 1. */
static int
xdp_maps(struct ncd *d, unsigned int i)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[i];
	struct ncd_port *p = &d->ports[i];
	char iface[IF_NAMESIZE], drv[32] = "";
	bool generic = pc->xdp_attach == NCD_XDP_GENERIC;
	int ret;

	/*
	 * net_af_xdp attaches natively where the driver can. On a veth that
	 * costs the kernel's own traffic a copy of every frame (its native XDP
	 * needs a headroom the stack's frames do not have); generic mode does
	 * not (bench/README.md, the test bed).
	 */
	if (pc->xdp_attach == NCD_XDP_AUTO && ncd_devargs_iface(pc->device, iface, sizeof(iface)) &&
	    ncd_iface_driver(iface, drv, sizeof(drv)) == 0 && strcmp(drv, "veth") == 0)
		generic = true;
	if (generic && (ret = ncd_xdp_move_generic((unsigned int)p->xdp_ifindex)) != 0) {
		NCD_LOG(ERR, "port %s: exception mode xdp: attaching the program in generic mode: "
			"%s", pc->name, strerror(-ret));
		return 1;
	}
	p->xdp_generic = generic;
	ret = ncd_xdp_maps_find((unsigned int)p->xdp_ifindex, &p->xdp_maps);
	if (ret != 0) {
		NCD_LOG(ERR, "port %s: exception mode xdp: the maps of the XDP program %s on the "
			"port's interface: %s", pc->name, pc->xdp_prog,
			ret == -ENOENT ? "no netchanneld program is attached" : strerror(-ret));
		return 1;
	}
	p->xdp = true;
	return 0;
}

static int
port_init(struct ncd *d, unsigned int i)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[i];
	struct ncd_port *p = &d->ports[i];
	unsigned int nw = workers_of_port(d, i);
	struct rte_eth_dev_info info;
	char exc[512], dev[1024];
	int ret;

	snprintf(dev, sizeof(dev), "%s", pc->device);
	if (xdp_takeover(d, i, dev, sizeof(dev)) != 0)
		return 1;
	ret = probe(dev, &p->port_id);
	if (ret < 0)
		return CONF_ERR(d, i, "device", "cannot probe '%s': no such driver or device, or bad "
				"arguments (rte_dev_probe: %s)", pc->device, strerror(-ret));
	rte_eth_dev_info_get(p->port_id, &info);
	if (pc->rx_queues > info.max_rx_queues)
		return CONF_ERR(d, i, "rx_queues", "%u, but %s supports %u", pc->rx_queues,
				pc->device, info.max_rx_queues);
	if (nw > info.max_tx_queues)
		return CONF_ERR(d, i, "device", "%u workers poll it and each needs a tx queue, but "
				"%s supports %u", nw, pc->device, info.max_tx_queues);
	/*
	 * A tx queue for every worker where the device has enough, so that NAT
	 * can send out of a port its worker does not poll; otherwise only the
	 * workers that poll it can.
	 */
	p->ntxq = d->cfg.nworkers <= info.max_tx_queues ? (uint16_t)d->cfg.nworkers : (uint16_t)nw;
	p->configured = true;
	if (hooks.configured != NULL && hooks.configured(d, i) != 0)
		return 1;
	if (setup_queues(d, p->port_id, pc->name, pc->rx_queues, p->ntxq, pc->mtu, true,
			 &p->ip_csum_offload, sleeper_polls(d, i)))
		return 1;
	if (pc->xdp && xdp_maps(d, i) != 0)
		return 1;
	rte_eth_macaddr_get(p->port_id, &p->mac);
	p->exc_max_frame = pc->mtu + RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN;
	p->exc_mtu = pc->has_host && pc->host.mtu != 0 ? pc->host.mtu : pc->mtu;
	if (pc->exc_device == NULL)
		return 0;
	exc_devargs(pc, p, exc, sizeof(exc));
	ret = probe(exc, &p->exc_id);
	if (ret < 0)
		return CONF_ERR(d, i, "exception.device", "cannot probe '%s': no such driver or "
				"device, or bad arguments (rte_dev_probe: %s)", exc, strerror(-ret));
	rte_eth_dev_info_get(p->exc_id, &info);
	if (nw > info.max_tx_queues || nw > info.max_rx_queues)
		return CONF_ERR(d, i, "exception.device", "%u workers poll the port and each needs "
				"an rx and a tx queue, but %s supports %u rx, %u tx", nw, exc,
				info.max_rx_queues, info.max_tx_queues);
	p->has_exc = true;
	if (setup_queues(d, p->exc_id, exc, (uint16_t)nw, (uint16_t)nw, pc->mtu, false, NULL,
			 sleeper_polls(d, i)))
		return 1;
	return 0;
}

int
ncd_ports_init(struct ncd *d)
{
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		int ret = port_init(d, i);

		if (ret != 0)
			return ret;
	}
	/*
	 * Each worker's queue index on every port it polls (and on its exception
	 * device); on the port's own tx queues, the first ones are theirs, and
	 * the rest, if the port has one per worker, go to the other workers.
	 */
	for (unsigned int p = 0; p < d->cfg.nports; p++) {
		struct ncd_port *port = &d->ports[p];
		uint16_t k = 0;

		for (unsigned int w = 0; w < d->cfg.nworkers; w++) {
			port->txq[w] = NCD_NO_TXQ;
			if (polls(&d->cfg.workers[w], p)) {
				port->exc_txq[w] = k;
				port->txq[w] = k++;
			}
		}
		for (unsigned int w = 0; w < d->cfg.nworkers && k < port->ntxq; w++)
			if (port->txq[w] == NCD_NO_TXQ)
				port->txq[w] = k++;
	}
	return 0;
}

/* RTE_ETH_EVENT_INTR_LSC / INTR_RMV, from EAL's interrupt thread: only a flag. */
static int
link_event(uint16_t port_id, enum rte_eth_event_type ev, void *arg, void *ret_param)
{
	struct ncd_port *p = arg;

	(void)port_id;
	(void)ret_param;
	if (ev == RTE_ETH_EVENT_INTR_RMV)
		p->link.removed = true;
	p->link.event = 1;
	return 0;
}

int
ncd_ports_start(struct ncd *d)
{
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port *p = &d->ports[i];
		int ret;

		if (p->has_exc && (ret = rte_eth_dev_start(p->exc_id)) == 0)
			p->exc_started = true;
		else if (p->has_exc) {
			NCD_LOG(ERR, "rte_eth_dev_start(%s exception): %s", d->cfg.ports[i].name,
				strerror(-ret));
			return -1;
		}
		/* Where the PMD sends them: look at the link as soon as it changes. */
		rte_eth_dev_callback_register(p->port_id, RTE_ETH_EVENT_INTR_LSC, link_event, p);
		rte_eth_dev_callback_register(p->port_id, RTE_ETH_EVENT_INTR_RMV, link_event, p);
		ret = rte_eth_dev_start(p->port_id);
		p->started = ret == 0;
		if (ret != 0) {
			NCD_LOG(ERR, "rte_eth_dev_start(%s): %s", d->cfg.ports[i].name, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

/*
 * The kernel's word on an interface-backed port ("iface=NAME"): 1 up, 0 down
 * (or gone), -1 no interface. operstate is read in the daemon's own network
 * namespace, which ip netns exec's /sys is.
 */
static int
kernel_link(const char *dev)
{
	char iface[IF_NAMESIZE], path[128], state[32] = "";
	FILE *f;

	if (!ncd_devargs_iface(dev, iface, sizeof(iface)))
		return -1;
	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", iface);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(state, sizeof(state), f) == NULL)
		state[0] = '\0';
	fclose(f);
	return strncmp(state, "up", 2) == 0 || strncmp(state, "unknown", 7) == 0;
}

/*
 * The exception device made again, its kernel interface having gone (or gone
 * down): workers stop using it (misses are drop_exc_down), it is removed,
 * probed, set up and started as at start, and the host's configuration
 * (exception.host) applied. On failure it stays down and is tried again.
 */
static void
exc_remake(struct ncd *d, unsigned int i, const char *why)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[i];
	struct ncd_port *p = &d->ports[i];
	uint16_t nw = (uint16_t)workers_of_port(d, i);
	struct rte_eth_dev_info info;
	char exc[512];
	int ret;

	if (!p->exc_down) {
		__atomic_store_n(&p->exc_down, true, __ATOMIC_RELEASE);
		/* After this no worker is in a burst that still uses the old device. */
		rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
		if (p->exc_started)
			rte_eth_dev_stop(p->exc_id);
		p->exc_started = false;
		if (rte_eth_dev_info_get(p->exc_id, &info) == 0)
			rte_dev_remove(info.device);
		NCD_LOG(NOTICE, "port %s: its exception device %s is %s: making it again",
			pc->name, pc->exc_device, why);
	}
	exc_devargs(pc, p, exc, sizeof(exc));
	ret = probe(exc, &p->exc_id);
	if (ret == 0 && setup_queues(d, p->exc_id, exc, nw, nw, pc->mtu, false, NULL,
				     sleeper_polls(d, i)) != 0)
		ret = -EIO;
	if (ret == 0)
		ret = rte_eth_dev_start(p->exc_id);
	if (ret != 0) {
		NCD_LOG(ERR, "port %s: making %s again: %s; misses are dropped (drop_exc_down) "
			"until it works", pc->name, exc, strerror(-ret));
		return;
	}
	p->exc_started = true;
	if (rte_eth_dev_info_get(p->exc_id, &info) == 0) {
		p->exc_ifindex = (int)info.if_index;
		if (!p->xdp)
			p->nh_ifindex = p->exc_ifindex;
	}
	if (hooks.exception_remade != NULL)
		hooks.exception_remade(d, i);
	p->exc_remade++;
	/* Release: a worker that sees it back sees its new id. */
	__atomic_store_n(&p->exc_down, false, __ATOMIC_RELEASE);
	NCD_LOG(NOTICE, "port %s: its exception device is back (made again %" PRIu64 " times)",
		pc->name, p->exc_remade);
}

/* exc_lost()'s answer for an interface an administrator set down: not lost, and left so. */
static const char EXC_ADMIN_DOWN[] = "set down";

/*
 * Whether the exception device's kernel interface ("iface=NAME") is gone (a
 * reason), or set down (EXC_ADMIN_DOWN), or there and up (NULL).
 */
static const char *
exc_lost(const struct ncd_port_conf *pc, const struct ncd_port *p)
{
	char name[IF_NAMESIZE], path[128];
	unsigned int flags = 0;
	unsigned int idx;
	FILE *f;

	if (!p->has_exc || !ncd_devargs_iface(pc->exc_device, name, sizeof(name)))
		return NULL;
	if (p->exc_down && !p->exc_admin_down)
		return "still gone";
	idx = if_nametoindex(name);
	if (idx == 0 || (int)idx != p->exc_ifindex)
		return "gone";
	snprintf(path, sizeof(path), "/sys/class/net/%s/flags", name);
	f = fopen(path, "r");
	if (f != NULL) {
		if (fscanf(f, "%x", &flags) != 1)
			flags = IFF_UP;
		fclose(f);
	}
	return f != NULL && !(flags & IFF_UP) ? EXC_ADMIN_DOWN : NULL;
}

/*
 * The exception interface set down, or up again, by an administrator: the
 * daemon leaves its admin state alone. Down, misses are dropped
 * (drop_exc_down) and the event counted; up, they go to it again.
 */
static void
exc_admin(struct ncd *d, unsigned int i, bool down)
{
	struct ncd_port *p = &d->ports[i];

	if (down == p->exc_admin_down)
		return;
	p->exc_admin_down = down;
	p->exc_admin_downs += down;
	__atomic_store_n(&p->exc_down, down, __ATOMIC_RELEASE);
	NCD_LOG(NOTICE, "port %s: its exception interface was set %s by an administrator%s",
		d->cfg.ports[i].name, down ? "down" : "up",
		down ? ": misses are dropped (drop_exc_down) until it is up again" : "");
}

void
ncd_ports_watch(struct ncd *d)
{
	uint64_t now = ncd_now_ms();

	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port *p = &d->ports[i];
		struct rte_eth_link l;
		const char *lost;
		bool up;
		int k;

		if (!p->started || (!p->link.event && now - p->link.checked_ms < 1000))
			continue;
		lost = exc_lost(&d->cfg.ports[i], p);
		if (lost == EXC_ADMIN_DOWN || (lost == NULL && p->exc_admin_down)) {
			exc_admin(d, i, lost != NULL);
		} else if (lost != NULL) {
			/* Gone while set down: made again whole, as any gone one. */
			if (p->exc_admin_down) {
				p->exc_admin_down = false;
				__atomic_store_n(&p->exc_down, false, __ATOMIC_RELEASE);
			}
			exc_remake(d, i, lost);
			/* A TAP made anew has a carrier: none while the wire has none. */
			if (p->link.known && !p->link.up && hooks.carrier != NULL)
				hooks.carrier(d, i, false);
		}
		p->link.event = 0;
		p->link.checked_ms = now;
		if (p->link.removed || rte_eth_link_get_nowait(p->port_id, &l) != 0)
			memset(&l, 0, sizeof(l));
		k = kernel_link(d->cfg.ports[i].device);
		up = l.link_status && k != 0;
		if (p->link.known && up == p->link.up && (!up || l.link_speed == p->link.speed))
			continue;
		if (p->link.known) {
			p->link.changes++;
			/*
			 * The TAP's carrier follows the wire's changes, as a NIC's interface's
			 * does (not the first look, which may come before the link settles).
			 */
			if (p->has_exc && up != p->link.up && hooks.carrier != NULL)
				hooks.carrier(d, i, up);
			if (up)
				NCD_LOG(NOTICE, "port %s: link up, %u Mbps", d->cfg.ports[i].name,
					l.link_speed);
			else
				NCD_LOG(NOTICE, "port %s: link down%s", d->cfg.ports[i].name,
					p->link.removed ? " (the device was removed)" :
					k == 0 ? " (its kernel interface has no carrier, or is down or gone)" :
					"");
		}
		p->link.known = true;
		p->link.up = up;
		p->link.speed = up ? l.link_speed : 0;
	}
}

void
ncd_ports_close(struct ncd *d)
{
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port *p = &d->ports[i];

		if (!p->configured)
			continue;
		rte_eth_dev_callback_unregister(p->port_id, RTE_ETH_EVENT_INTR_LSC, link_event, p);
		rte_eth_dev_callback_unregister(p->port_id, RTE_ETH_EVENT_INTR_RMV, link_event, p);
		if (p->started)
			rte_eth_dev_stop(p->port_id);
		rte_eth_dev_close(p->port_id);
		/* net_af_xdp took its program off as it closed: the kernel gets everything. */
		if (d->cfg.ports[i].xdp) {
			char other[64];

			ncd_xdp_maps_close(&p->xdp_maps);
			/* net_af_xdp takes off only a native program: a generic one is the daemon's. */
			if (p->xdp_generic && ncd_xdp_detach((unsigned int)p->xdp_ifindex, other,
							     sizeof(other)) < 0)
				NCD_LOG(ERR, "port %s: taking the XDP program off at exit failed: the "
					"kernel gets everything all the same", d->cfg.ports[i].name);
		}
		if (p->has_exc) {
			if (p->exc_started)
				rte_eth_dev_stop(p->exc_id);
			rte_eth_dev_close(p->exc_id);
		}
	}
}
