/*
 * python_bench_native.c - the C side of bench/python_bench.py, the baselines its Python
 * figures are compared with in the same run. python_bench.py compiles it with cc at start
 * (against include/keywatch.h) and loads it with ctypes after the libkeywatch inside the
 * installed keywatch package, so both sides use the same library:
 *  - kw_pybench_noop: a no-op C handler (KW_RESULT_ACK) for kw_engine_add_handler;
 *  - kw_pybench_track: n kw_client_track calls in pipelines of `batch`, 16-byte keys
 *    "<prefix><n>" and 16-byte values, the loop Client.track's pipeline is measured against.
 * Not thread-safe beyond what the C API states (one client per thread).
 */
#include <stdio.h>
#include <string.h>

#include "keywatch.h"

int kw_pybench_noop(kw_event_t *ev, void *opaque) {
    (void)ev;
    (void)opaque;
    return KW_RESULT_ACK;
}

/* Returns KW_OK, or the first failing status (kw_client_last_error says why). */
int kw_pybench_track(kw_client_t *client, const char *prefix, long long n, int batch,
                     long long ttl_ms) {
    static const char value[] = "0123456789abcdef";
    char key[64];
    long long i = 0;
    while (i < n) {
        int rc = kw_client_pipeline_begin(client);
        int k;
        size_t count = 0;
        if (rc != KW_OK) return rc;
        for (k = 0; k < batch && i < n; k++, i++) {
            int len = snprintf(key, sizeof key, "%s%0*lld", prefix, 16 - (int)strlen(prefix), i);
            rc = kw_client_track(client, key, (size_t)len, value, 16, ttl_ms, 0, NULL);
            if (rc != KW_OK) return rc;
        }
        rc = kw_client_pipeline_end(client, NULL, 0, &count);
        if (rc != KW_OK) return rc;
    }
    return KW_OK;
}
