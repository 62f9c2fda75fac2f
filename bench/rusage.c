/* rusage REPORT COMMAND [ARGS...]: runs COMMAND, then writes its wall time
 * and peak resident set size as JSON into the file REPORT:
 * {"seconds": S, "peak_rss_bytes": B}.
 *
 * For bench/footprint.py. A child's ru_maxrss includes the memory image it
 * was forked from (the kernel records the old image's peak at exec), so
 * measuring from Python would add Python's ~10 MB to every figure; this
 * program is that small parent instead. Its output goes to stderr's
 * neighbour fd 3 if open, else stdout; the command's own output is left
 * alone. Exit status: the command's (128 + signal when killed).
 *
 * Build: cc -O2 bench/rusage.c -o rusage
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: rusage REPORT COMMAND [ARGS...]\n");
    return 2;
  }
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  pid_t pid = fork();
  if (pid < 0) return perror("rusage: fork"), 2;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    perror("rusage: exec");
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) < 0) return perror("rusage: wait4"), 2;
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
  FILE* out = fopen(argv[1], "w");
  if (out == NULL) return perror(argv[1]), 2;
  fprintf(out, "{\"seconds\": %.6f, \"peak_rss_bytes\": %ld}\n", seconds, usage.ru_maxrss * 1024L);
  fclose(out);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
