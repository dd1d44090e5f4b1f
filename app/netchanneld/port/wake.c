/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a sleeping worker waits on: for each rx queue, an fd that becomes
 * readable when the queue has packets. DPDK gives one for PMDs with rx
 * interrupts (net_tap's is the queue's own fd, net_memif's an eventfd).
 * net_af_xdp in DPDK 22.11 has none, but its queue is an AF_XDP socket,
 * which the kernel makes readable when its rx ring fills: the socket is
 * found by asking the kernel (sock_diag) which of its AF_XDP sockets is
 * bound to the port's interface and queue, and which of this process's fds
 * is that socket.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/if_xdp.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <linux/xdp_diag.h>
#include <sys/socket.h>

#include <rte_ethdev.h>

#include "port/port.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

struct xsk_find {
	unsigned int ifindex, queue;
	unsigned long ino;             /* found: its inode, or 0 */
};

static int
xsk_answer(const struct nlmsghdr *n, void *arg)
{
	struct xsk_find *f = arg;
	const struct xdp_diag_msg *m = mnl_nlmsg_get_payload(n);
	const struct nlattr *a;

	if (n->nlmsg_type != SOCK_DIAG_BY_FAMILY || n->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return MNL_CB_OK;
	mnl_attr_for_each(a, n, sizeof(*m)) {
		const struct xdp_diag_info *info = mnl_attr_get_payload(a);

		if (mnl_attr_get_type(a) == XDP_DIAG_INFO &&
		    mnl_attr_get_payload_len(a) >= sizeof(*info) &&
		    info->ifindex == f->ifindex && info->queue_id == f->queue)
			f->ino = m->xdiag_ino;
	}
	return MNL_CB_OK;
}

/* The inode of the AF_XDP socket bound to (ifindex, queue) in this namespace, or 0. */
static unsigned long
xsk_inode(unsigned int ifindex, unsigned int queue)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_SOCK_DIAG, SOCK_CLOEXEC);
	struct xsk_find f = { .ifindex = ifindex, .queue = queue };
	struct nlmsghdr *n;
	struct xdp_diag_req *r;
	unsigned int seq = 1;
	int len;

	if (nl == NULL)
		return 0;
	n = mnl_nlmsg_put_header(buf);
	n->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	n->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	n->nlmsg_seq = seq;
	r = mnl_nlmsg_put_extra_header(n, sizeof(*r));
	r->sdiag_family = AF_XDP;
	r->xdiag_show = XDP_SHOW_INFO;
	if (mnl_socket_sendto(nl, n, n->nlmsg_len) < 0) {
		mnl_socket_close(nl);
		return 0;
	}
	while ((len = (int)mnl_socket_recvfrom(nl, buf, sizeof(buf))) > 0)
		if (mnl_cb_run(buf, (size_t)len, seq, 0, xsk_answer, &f) <= MNL_CB_STOP)
			break;
	mnl_socket_close(nl);
	return f.ino;
}

/* This process's fd of socket inode ino, or -1. */
static int
fd_of_inode(unsigned long ino)
{
	char want[64], path[300], link[64];
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int fd = -1;

	if (dir == NULL)
		return -1;
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	while (fd < 0 && (e = readdir(dir)) != NULL) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, want) == 0)
			fd = atoi(e->d_name);
	}
	closedir(dir);
	return fd;
}

int
ncd_rxq_wake_fd(uint16_t port_id, uint16_t queue)
{
	struct rte_eth_dev_info info;
	unsigned long ino;
	int fd;

	if (rte_eth_dev_info_get(port_id, &info) != 0)
		return -1;
	if (strcmp(info.driver_name, "net_af_xdp") == 0) {
		/* Its queues are the interface's from start_queue on; the default is 0. */
		ino = info.if_index != 0 ? xsk_inode(info.if_index, queue) : 0;
		fd = ino != 0 ? fd_of_inode(ino) : -1;
		return fd >= 0 ? fd : NCD_WAKE_XSK_UNNAMED;
	}
	fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, queue);
	return fd >= 0 ? fd : -1;
}

int
ncd_xsk_fds(int *fds, int max)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (dir == NULL)
		return -errno;
	while ((e = readdir(dir)) != NULL) {
		int fd = atoi(e->d_name), dom = 0;
		socklen_t len = sizeof(dom);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(dir))
			continue;
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) != 0 || dom != AF_XDP)
			continue;
		if (n == max) {
			n = -ENOSPC;
			break;
		}
		fds[n++] = fd;
	}
	closedir(dir);
	return n;
}

bool
ncd_rxq_intr_wanted(const char *driver)
{
	return strcmp(driver, "net_tap") == 0 || strcmp(driver, "net_memif") == 0;
}
