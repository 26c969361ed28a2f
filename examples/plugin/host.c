/*
 * host - runs a handler plugin in an engine for some seconds: the test of the out-of-tree
 * example (run_plugin_example.sh), compiled against the installed keywatch.h.
 * Usage: host REDIS_URL PLUGIN SECONDS [OPTION VALUE]...
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <keywatch.h>

int main(int argc, char **argv) {
    char err[1024] = "";
    kw_conf_t *conf = kw_conf_new();
    kw_engine_t *engine = NULL;
    int rc;
    if (argc < 4 || (argc - 4) % 2) {
        fprintf(stderr, "usage: %s REDIS_URL PLUGIN SECONDS [OPTION VALUE]...\n", argv[0]);
        return 2;
    }
    argv[argc] = NULL; /* options: name, value, ..., NULL */
    if ((rc = kw_conf_set(conf, "redis.url", argv[1], err, sizeof err)) != KW_OK ||
        (rc = kw_conf_set(conf, "notify.enable", "true", err, sizeof err)) != KW_OK ||
        (rc = kw_engine_new(conf, &engine, err, sizeof err)) != KW_OK ||
        (rc = kw_engine_add_plugin(engine, argv[2], NULL, NULL, (const char *const *)argv + 4, err,
                                   sizeof err)) != KW_OK) {
        fprintf(stderr, "host: %s: %s\n", kw_err_name(rc), err);
        return 1;
    }
    if (kw_engine_start(engine) != KW_OK) {
        fprintf(stderr, "host: %s\n", kw_engine_last_error(engine));
        return 1;
    }
    fprintf(stderr, "running\n");
    sleep((unsigned)atoi(argv[3]));
    kw_engine_free(engine);
    kw_conf_free(conf);
    return 0;
}
