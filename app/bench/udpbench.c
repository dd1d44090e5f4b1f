/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * udpbench: the kernel's side of the test bed benchmark (scripts/bench.sh testbed).
 *
 *   udpbench send ADDR PORT SECONDS [PAYLOAD]   send UDP datagrams (sendmmsg) for SECONDS
 *   udpbench recv PORT SECONDS                  receive them on a kernel socket (recvmmsg)
 *
 * Both print one JSON object: packets, seconds, and the CPU seconds (user + system) this
 * process used, so the kernel's receive cost can be set against a netchanneld client's.
 * Bounded: each stops by itself after SECONDS.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "nc_version.h"

#define BATCH 64

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int
usage(void)
{
	fprintf(stderr, "usage: udpbench send ADDR PORT SECONDS [PAYLOAD]\n"
			"       udpbench recv PORT SECONDS\n"
			"       udpbench --version\n");
	return 2;
}

int
main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	static char bufs[BATCH][2048];
	unsigned long long packets = 0;
	double t0, end, secs;
	int fd, send_mode;

	/* As every tool of the release says it (no DPDK here: the kernel's side). */
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("udpbench (netchanneld) %s (%s)\n", NC_PROJECT_VERSION, NC_GIT_DESCRIBE);
		return 0;
	}
	if (argc < 4)
		return usage();
	send_mode = strcmp(argv[1], "send") == 0;
	if (!send_mode && strcmp(argv[1], "recv") != 0)
		return usage();
	memset(&ss, 0, sizeof(ss));
	if (send_mode) {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
		size_t payload = argc > 5 ? strtoul(argv[5], NULL, 0) : 64;

		if (argc < 5 || payload > sizeof(bufs[0]))
			return usage();
		if (inet_pton(AF_INET, argv[2], &a4->sin_addr) == 1) {
			a4->sin_family = AF_INET;
			a4->sin_port = htons((uint16_t)atoi(argv[3]));
		} else if (inet_pton(AF_INET6, argv[2], &a6->sin6_addr) == 1) {
			a6->sin6_family = AF_INET6;
			a6->sin6_port = htons((uint16_t)atoi(argv[3]));
		} else {
			fprintf(stderr, "udpbench: %s: not an address\n", argv[2]);
			return 2;
		}
		secs = atof(argv[4]);
		fd = socket(ss.ss_family, SOCK_DGRAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sizeof(ss)) != 0) {
			perror("udpbench: socket/connect");
			return 1;
		}
		for (int i = 0; i < BATCH; i++) {
			memset(bufs[i], 'u', payload);
			iov[i] = (struct iovec){ bufs[i], payload };
			msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
		}
	} else {
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
					   .sin6_port = htons((uint16_t)atoi(argv[2])) };
		struct timeval tv = { .tv_usec = 100 * 1000 };
		int rcvbuf = 8 << 20, zero = 0;

		secs = atof(argv[3]);
		fd = socket(AF_INET6, SOCK_DGRAM, 0);
		if (fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0 ||
		    bind(fd, (struct sockaddr *)&a6, sizeof(a6)) != 0) {
			perror("udpbench: socket/bind");
			return 1;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
			msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
		}
		printf("{\"ready\": true}\n");
		fflush(stdout);
	}
	t0 = now();
	end = t0 + secs;
	while (now() < end) {
		int n = send_mode ? sendmmsg(fd, msgs, BATCH, 0) : recvmmsg(fd, msgs, BATCH, 0, NULL);

		if (n > 0)
			packets += (unsigned long long)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED &&
			 errno != ENOBUFS)
			break;
	}
	printf("{\"mode\": \"%s\", \"packets\": %llu, \"seconds\": %.3f, \"cpu_seconds\": %.3f}\n",
	       argv[1], packets, now() - t0, cpu());
	close(fd);
	return 0;
}
