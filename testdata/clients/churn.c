/* Churn for the soak test: N short-lived processes, process i in network
 * namespace i % len(netns) and cgroup i % len(cgroups), each failing one
 * connect() to 127.0.0.1:8080 (exhausted there) and exiting at once.
 * Usage: churn N NETNS_LIST CGROUP_LIST (files with one path a line). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char **readlines(const char *path, int *n)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		exit(2);
	}
	char **out = NULL, line[4096];
	*n = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0])
			continue;
		out = realloc(out, sizeof(char *) * (*n + 1));
		out[(*n)++] = strdup(line);
	}
	fclose(f);
	return out;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s N NETNS_LIST CGROUP_LIST\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[1]), nns, ncg;
	char **nspaths = readlines(argv[2], &nns);
	char **cgpaths = readlines(argv[3], &ncg);
	int *nsfd = calloc(nns, sizeof(int));
	for (int i = 0; i < nns; i++) {
		nsfd[i] = open(nspaths[i], O_RDONLY | O_CLOEXEC);
		if (nsfd[i] < 0) {
			perror(nspaths[i]);
			return 2;
		}
	}
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(8080), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int failed = 0;
	for (int i = 0; i < n; i++) {
		if (setns(nsfd[i % nns], CLONE_NEWNET) < 0) {
			perror("setns");
			return 1;
		}
		int go[2];
		if (pipe(go) < 0) {
			perror("pipe");
			return 1;
		}
		pid_t pid = fork();
		if (pid == 0) {
			char c;
			close(go[1]);
			read(go[0], &c, 1); /* wait until moved into its cgroup */
			int s = socket(AF_INET, SOCK_STREAM, 0);
			_exit(connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? 0 : 1);
		}
		close(go[0]);
		char procs[4200], buf[32];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgpaths[i % ncg]);
		int fd = open(procs, O_WRONLY);
		int len = snprintf(buf, sizeof(buf), "%d", pid);
		if (fd < 0 || write(fd, buf, len) != len) {
			perror(procs);
			return 1;
		}
		close(fd);
		write(go[1], "g", 1);
		close(go[1]);
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			failed++;
	}
	printf("%d processes, %d failed to connect\n", n, failed);
	return failed == n ? 0 : 1;
}
