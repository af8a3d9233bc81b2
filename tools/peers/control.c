/*
 * The control workloads of crates/bench/programs (fib, collatz, nested) in
 * C, run member by member: the yardstick of `tools/bench/run control`,
 * compiled there with gcc -O1 and -O2 (and -fopenmp).
 *
 *   control WORKLOAD MEMBERS RUNS WARMUP_SECONDS
 *
 * WORKLOAD is fib, collatz, nested or nested-same; member i's input is the
 * one `autobatch-bench` gives it (crates/bench/src/main.rs, `workloads`).
 * Each run computes every member's result; the members are split over
 * OpenMP's threads (OMP_NUM_THREADS; one thread runs them in order). Runs
 * repeat untimed for WARMUP_SECONDS, then RUNS are timed. Prints one JSON
 * object: the seconds of each timed run, their median, the thread count
 * and the sum of the members' results (wrapping, as a check that both
 * sides computed the same).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>

static int64_t fib(int64_t n) {
    return n <= 1 ? 1 : (int64_t)((uint64_t)fib(n - 2) + (uint64_t)fib(n - 1));
}

static int64_t collatz(int64_t n) {
    int64_t x = n, steps = 0;
    while (x != 1) {
        x = x % 2 == 0 ? x / 2 : (int64_t)((uint64_t)x * 3u + 1u);
        steps += 1;
    }
    return steps;
}

static int64_t nested(int64_t n) {
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++)
            s += (i * j) % 7;
    return s;
}

typedef int64_t (*workload_fn)(int64_t);

struct workload {
    const char *name;
    workload_fn run;
    int64_t (*input)(int64_t member);
};

static int64_t fib_input(int64_t i) { return 15 + i % 6; }
static int64_t collatz_input(int64_t i) { return 1 + (i * 7919) % 100000; }
static int64_t nested_input(int64_t i) { return 20 + i % 21; }
static int64_t same_input(int64_t i) { (void)i; return 30; }

static const struct workload WORKLOADS[] = {
    {"fib", fib, fib_input},
    {"collatz", collatz, collatz_input},
    {"nested", nested, nested_input},
    {"nested-same", nested, same_input},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One run over every member: the wrapping sum of their results. */
static uint64_t run_all(workload_fn f, const int64_t *inputs, int64_t members) {
    uint64_t sum = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : sum)
    for (int64_t i = 0; i < members; i++)
        sum += (uint64_t)f(inputs[i]);
    return sum;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: control fib|collatz|nested|nested-same MEMBERS RUNS WARMUP_SECONDS\n");
        return 2;
    }
    const struct workload *w = NULL;
    for (size_t k = 0; k < sizeof WORKLOADS / sizeof WORKLOADS[0]; k++)
        if (strcmp(argv[1], WORKLOADS[k].name) == 0)
            w = &WORKLOADS[k];
    int64_t members = atoll(argv[2]);
    int runs = atoi(argv[3]);
    double warmup = atof(argv[4]);
    if (w == NULL || members < 1 || runs < 1 || warmup < 0) {
        fprintf(stderr, "control: unknown workload or bad number: %s %s %s %s\n", argv[1], argv[2],
                argv[3], argv[4]);
        return 2;
    }
    int64_t *inputs = malloc(sizeof(int64_t) * (size_t)members);
    double *seconds = malloc(sizeof(double) * (size_t)runs);
    if (inputs == NULL || seconds == NULL)
        return 1;
    for (int64_t i = 0; i < members; i++)
        inputs[i] = w->input(i);
    double started = now();
    uint64_t sum = run_all(w->run, inputs, members);
    while (now() - started < warmup)
        sum = run_all(w->run, inputs, members);
    for (int r = 0; r < runs; r++) {
        double t = now();
        sum = run_all(w->run, inputs, members);
        seconds[r] = now() - t;
    }
    printf("{\"workload\": \"%s\", \"members\": %lld, \"threads\": %d, \"seconds\": [", w->name,
           (long long)members, omp_get_max_threads());
    for (int r = 0; r < runs; r++)
        printf("%s%.9g", r ? ", " : "", seconds[r]);
    qsort(seconds, (size_t)runs, sizeof(double), compare);
    printf("], \"median_seconds\": %.9g, \"result_sum\": %lld}\n", seconds[runs / 2],
           (long long)(int64_t)sum);
    free(inputs);
    free(seconds);
    return 0;
}
