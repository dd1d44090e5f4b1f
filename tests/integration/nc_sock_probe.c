/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The calls of the socket API that Python does not make, as a C server uses them, for
 * test_preload's comparison with and without the preload library: pselect() then
 * recvmmsg(MSG_WAITFORONE) and sendmmsg(), ppoll(), readv() and writev() on a connected
 * socket, O_NONBLOCK by fcntl() and MSG_DONTWAIT. Each answer is "STEP:" and what was
 * received; the peer (PROBE_C_PEER) compares.
 *
 *   nc_sock_probe PORT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static void
die(const char *what)
{
	fprintf(stderr, "nc_sock_probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, peer;
	struct timespec ts = { .tv_sec = 10 };
	struct mmsghdr mm[8];
	struct iovec iov[8], out[8], two[2];
	char bufs[8][64], ans[8][128], h[8], t[64];
	socklen_t pl = sizeof(peer);
	struct pollfd p;
	fd_set r;
	int fd, got = 0;
	ssize_t n;

	if (argc != 2)
		return 2;
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("socket and bind");
	printf("ready\n");
	fflush(stdout);

	/* 1: pselect, then recvmmsg until the peer's four are in; one sendmmsg answers them. */
	FD_ZERO(&r);
	FD_SET(fd, &r);
	if (pselect(fd + 1, &r, NULL, NULL, &ts, NULL) != 1 || !FD_ISSET(fd, &r))
		die("pselect");
	while (got < 4) {
		for (int i = 0; i < 8; i++) {
			iov[i] = (struct iovec){ .iov_base = bufs[i], .iov_len = sizeof(bufs[i]) - 1 };
			mm[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1,
							       .msg_name = i == 0 ? &peer : NULL,
							       .msg_namelen = i == 0 ? sizeof(peer) : 0 } };
		}
		int k = recvmmsg(fd, mm, 8, MSG_WAITFORONE, NULL);

		if (k <= 0)
			die("recvmmsg");
		for (int i = 0; i < k; i++, got++) {
			bufs[i][mm[i].msg_len] = '\0';
			snprintf(ans[got], sizeof(ans[got]), "1:%s", bufs[i]);
		}
	}
	for (int i = 0; i < 4; i++) {
		out[i] = (struct iovec){ .iov_base = ans[i], .iov_len = strlen(ans[i]) };
		mm[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &out[i], .msg_iovlen = 1,
						       .msg_name = &peer, .msg_namelen = pl } };
	}
	if (sendmmsg(fd, mm, 4, 0) != 4)
		die("sendmmsg");

	/* 2: ppoll, then recvfrom. */
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (ppoll(&p, 1, &ts, NULL) != 1 || !(p.revents & POLLIN))
		die("ppoll");
	n = recvfrom(fd, bufs[0], sizeof(bufs[0]) - 1, 0, (struct sockaddr *)&peer, &pl);
	if (n < 0)
		die("recvfrom");
	bufs[0][n] = '\0';
	snprintf(ans[0], sizeof(ans[0]), "2:%s", bufs[0]);
	sendto(fd, ans[0], strlen(ans[0]), 0, (struct sockaddr *)&peer, pl);

	/* 3: connected: readv into a head of 4 bytes and a tail, writev the answer in two. */
	if (connect(fd, (struct sockaddr *)&peer, pl) != 0)
		die("connect");
	memset(h, 0, sizeof(h));
	memset(t, 0, sizeof(t));
	two[0] = (struct iovec){ .iov_base = h, .iov_len = 4 };
	two[1] = (struct iovec){ .iov_base = t, .iov_len = sizeof(t) - 1 };
	n = readv(fd, two, 2);
	if (n < 0)
		die("readv");
	two[0] = (struct iovec){ .iov_base = "3:", .iov_len = 2 };
	snprintf(ans[0], sizeof(ans[0]), "%zd:[%s][%s]", n, h, t);
	two[1] = (struct iovec){ .iov_base = ans[0], .iov_len = strlen(ans[0]) };
	if (writev(fd, two, 2) < 0)
		die("writev");

	/* 4: O_NONBLOCK by fcntl, and MSG_DONTWAIT: nothing waits, so EAGAIN; the flags read back. */
	int fl = fcntl(fd, F_GETFL);

	if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		die("fcntl");
	n = recv(fd, bufs[0], sizeof(bufs[0]), 0);
	int e1 = errno;
	int nb = (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;

	fcntl(fd, F_SETFL, fl);
	ssize_t n2 = recv(fd, bufs[0], sizeof(bufs[0]), MSG_DONTWAIT);
	int e2 = errno;

	snprintf(ans[0], sizeof(ans[0]), "4:%zd %s nonblock=%d was=%d %zd %s", n,
		 e1 == EAGAIN ? "EAGAIN" : strerror(e1), nb, (fl & O_NONBLOCK) != 0, n2,
		 e2 == EAGAIN ? "EAGAIN" : strerror(e2));
	if (send(fd, ans[0], strlen(ans[0]), 0) < 0)
		die("send");
	close(fd);
	printf("done\n");
	return 0;
}
