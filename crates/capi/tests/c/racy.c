/* Negative control of crates/capi/tests/capi/c_threads.rs: two threads write a
 * shared counter without a lock. helgrind and drd, run with the same
 * suppressions as the porin thread test, must report it; otherwise the
 * race check proves nothing. */
#include <pthread.h>
#include <stdio.h>

static long counter;

static void *bump(void *arg) {
    int i;
    (void)arg;
    for (i = 0; i < 1000; i++) counter++;
    return NULL;
}

int main(void) {
    pthread_t a, b;
    if (pthread_create(&a, NULL, bump, NULL) || pthread_create(&b, NULL, bump, NULL)) return 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("racy: %ld\n", counter);
    return 0;
}
