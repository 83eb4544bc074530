/* Hostile input for eaddr's BPF programs: connect()/bind() with a NULL
 * sockaddr, addrlen 0, addrlen larger than any sockaddr, a pointer to
 * unmapped memory, an unknown family, and a sockaddr another thread rewrites
 * while the calls run. Every call fails; none may crash eaddr or confuse the
 * verifier, and each event must say when the address could not be read.
 * Prints one line per case: "case errno". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in shared;
static volatile int stop;

static void *flip(void *arg)
{
	(void)arg;
	while (!stop) {
		shared.sin_family = AF_INET;
		shared.sin_port = htons(9);
		shared.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		shared.sin_family = 99; /* an unknown family, half the time */
		memset(&shared.sin_addr, 0xff, sizeof(shared.sin_addr));
	}
	return NULL;
}

static void report(const char *name, int rc)
{
	printf("%s %d\n", name, rc < 0 ? errno : 0);
	fflush(stdout);
}

int main(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char big[4096];
	memset(big, 0, sizeof(big));
	memcpy(big, &sa, sizeof(sa));

	/* A page that is mapped, then unmapped: its address faults. */
	void *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(gone, 4096);

	int fd = socket(AF_INET, SOCK_STREAM, 0);
	report("connect-null", connect(fd, NULL, sizeof(sa)));
	report("connect-len0", connect(fd, (struct sockaddr *)&sa, 0));
	report("connect-len-huge", connect(fd, (struct sockaddr *)big, sizeof(big)));
	report("connect-unmapped", connect(fd, (struct sockaddr *)gone, sizeof(sa)));
	struct sockaddr_in unk = sa;
	unk.sin_family = 99;
	report("connect-family99", connect(fd, (struct sockaddr *)&unk, sizeof(unk)));
	report("bind-null", bind(fd, NULL, sizeof(sa)));
	report("bind-unmapped", bind(fd, (struct sockaddr *)gone, sizeof(sa)));
	close(fd);

	/* Start valid, so that every racing call fails (refused, unreachable
	 * or unknown family) whichever bytes it reads: none can succeed. */
	shared = sa;
	pthread_t th;
	pthread_create(&th, NULL, flip, NULL);
	for (int i = 0; i < 200; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		connect(s, (struct sockaddr *)&shared, sizeof(shared));
		close(s);
	}
	stop = 1;
	pthread_join(th, NULL);
	report("race-done", 0);
	return 0;
}
