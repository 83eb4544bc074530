/* A plain C client: connect() to IP PORT and perror() on failure. The tests
 * build it twice, with gcc (glibc) and musl-gcc -static (musl), to show that
 * the same failure reads differently per C library. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s IP PORT\n", argv[0]);
		return 2;
	}
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, argv[1], &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(atoi(argv[2]));
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, argv[1], &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(atoi(argv[2]));
		len = sizeof(*in6);
	} else {
		fprintf(stderr, "%s: not an IP address\n", argv[1]);
		return 2;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		perror("connect");
		return 1;
	}
	close(fd);
	return 0;
}
