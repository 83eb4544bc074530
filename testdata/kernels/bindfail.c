/* bind() a TCP socket to 192.0.2.1:4242 (TEST-NET-1, never on the guest): expects EADDRNOTAVAIL.
 * The bind-failure client of testdata/kernels/run.sh, built with gcc -static. It sends nothing.
 * Exits 0 when bind() failed with EADDRNOTAVAIL, 1 otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4242) };
	inet_pton(AF_INET, "192.0.2.1", &a.sin_addr);
	int r = bind(fd, (struct sockaddr *)&a, sizeof(a));
	int e = errno;
	printf("bindfail: pid=%d fd=%d bind=%d errno=%d (%s)\n", getpid(), fd, r, r ? e : 0,
	       r ? strerror(e) : "ok");
	close(fd);
	return !(r == -1 && e == EADDRNOTAVAIL);
}
