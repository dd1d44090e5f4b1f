/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ports and their exception devices. Each worker that polls a port gets
 * index k among that port's workers: it transmits on tx queue k of the port
 * and of the exception device, and polls rx queue k of the exception device
 * (a multi-queue TAP spreads the kernel's frames over its queues).
 */
#include <errno.h>
#include <string.h>

#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "datapath/datapath.h"
#include "ncd.h"
#include "offload/offload.h"
#include "port/port.h"

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

static unsigned int
workers_of_port(const struct ncd *d, unsigned int p)
{
	unsigned int n = 0;

	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		for (unsigned int i = 0; i < d->workers[w].nrx; i++)
			if (d->workers[w].rx[i].port == p) {
				n++;
				break;
			}
	return n;
}

static int
setup_queues(struct ncd *d, uint16_t pid, const char *what, uint16_t nrx, uint16_t ntx,
	     uint16_t mtu, bool rss, bool *ip_csum)
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

static int
port_init(struct ncd *d, unsigned int i)
{
	const struct ncd_port_conf *pc = &d->cfg.ports[i];
	struct ncd_port *p = &d->ports[i];
	unsigned int nw = workers_of_port(d, i);
	struct rte_eth_dev_info info;
	char exc[512];
	int ret;

	ret = probe(pc->device, &p->port_id);
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
	if (ncd_offload_port_init(d, i) != 0)
		return 1;
	if (setup_queues(d, p->port_id, pc->name, pc->rx_queues, p->ntxq, pc->mtu, true,
			 &p->ip_csum_offload))
		return 1;
	rte_eth_macaddr_get(p->port_id, &p->mac);
	p->exc_max_frame = pc->mtu + RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN;
	if (pc->exc_device == NULL)
		return 0;

	/* A TAP carries the port's MAC, so the kernel answers ARP for the port. */
	snprintf(exc, sizeof(exc), "%s", pc->exc_device);
	if (strncmp(exc, "net_tap", 7) == 0 && strstr(exc, "mac=") == NULL) {
		struct rte_ether_addr m = p->mac;
		char mac[RTE_ETHER_ADDR_FMT_SIZE];

		if (!pc->exc_mac_port)
			memcpy(m.addr_bytes, pc->exc_mac, sizeof(m.addr_bytes));
		rte_ether_format_addr(mac, sizeof(mac), &m);
		if (pc->exc_mac_port || pc->exc_mac_set)
			snprintf(exc + strlen(exc), sizeof(exc) - strlen(exc), ",mac=%s", mac);
	}
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
	if (setup_queues(d, p->exc_id, exc, (uint16_t)nw, (uint16_t)nw, pc->mtu, false, NULL))
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
		uint16_t k = 0;

		for (unsigned int w = 0; w < d->cfg.nworkers; w++) {
			d->workers[w].txq[p] = NCD_NO_TXQ;
			for (unsigned int i = 0; i < d->workers[w].nrx; i++)
				if (d->workers[w].rx[i].port == p) {
					d->workers[w].exc_txq[p] = k;
					d->workers[w].txq[p] = k++;
					break;
				}
		}
		for (unsigned int w = 0; w < d->cfg.nworkers && k < d->ports[p].ntxq; w++)
			if (d->workers[w].txq[p] == NCD_NO_TXQ)
				d->workers[w].txq[p] = k++;
	}
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
		ret = rte_eth_dev_start(p->port_id);
		p->started = ret == 0;
		if (ret != 0) {
			NCD_LOG(ERR, "rte_eth_dev_start(%s): %s", d->cfg.ports[i].name, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

void
ncd_ports_close(struct ncd *d)
{
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port *p = &d->ports[i];

		if (!p->configured)
			continue;
		if (p->started)
			rte_eth_dev_stop(p->port_id);
		rte_eth_dev_close(p->port_id);
		if (p->has_exc) {
			if (p->exc_started)
				rte_eth_dev_stop(p->exc_id);
			rte_eth_dev_close(p->exc_id);
		}
	}
}
