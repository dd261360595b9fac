/* volume heal NAME enable|disable|statistics: the parts of `volume heal`
 * that cairnd answers (the others run in the CLI, src/cli/heal.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shd.h"

static int set_shd(struct mgmt *m, struct mgmt_vol *v, int on, FILE *out)
{
    char *args[] = {"volume", "set", v->name, "cluster.self-heal-daemon", on ? "on" : "off"};
    char *text = NULL;
    size_t len = 0;
    FILE *tmp = open_memstream(&text, &len);
    if (!tmp) {
        fprintf(out, "Volume heal failed: out of memory\n");
        return 1;
    }
    int rc = mgmt_cmd_set(m, 5, args, tmp);
    fclose(tmp);
    if (rc == 0)
        fprintf(out, "%s heal on volume %s has been successful \n", on ? "Enable" : "Disable",
                v->name);
    else
        fprintf(out, "%s heal on volume %s has been unsuccessful: %s", on ? "Enable" : "Disable",
                v->name, text ? text : "\n");
    free(text);
    return rc ? 1 : 0;
}

static void print_time(FILE *out, const char *what, long long t)
{
    char buf[64] = "-";
    time_t tt = (time_t)t;
    struct tm tm;
    if (t > 0 && localtime_r(&tt, &tm))
        strftime(buf, sizeof(buf), "%a %b %e %H:%M:%S %Y", &tm);
    fprintf(out, "%s time of crawl: %s\n\n", what, buf);
}

/* Prints the statistics file of this server's daemon (written by cairn-shd,
 * one block of "key value" lines per local brick). */
static int statistics(struct mgmt *m, struct mgmt_vol *v, FILE *out)
{
    char path[PATH_MAX + 64];
    mgmt_shd_stats_path(m, v->name, path, sizeof(path));
    FILE *f = fopen(path, "r");
    fprintf(out, "Gathering crawl statistics on volume %s has been successful\n", v->name);
    fprintf(out, "------------------------------------------------\n");
    if (!f) {
        fprintf(out, "\nNo crawl statistics on this server yet (self-heal daemon %s)\n",
                mgmt_shd_pid(v->id) ? "running, no crawl finished" : "not running");
        return 0;
    }
    char line[PATH_MAX + 128];
    long long val[16] = {0};
    static const char *const keys[] = {
        "start",  "end",          "healed",       "split",      "failed",   "copied",  "same",
        "crawls", "total_healed", "total_copied", "total_same", "resolved", "pending", NULL};
    char brick[PATH_MAX + 64] = "";
    int no = -1, have = 0;
    for (;;) {
        char *got = fgets(line, sizeof(line), f);
        if (!got || strncmp(line, "brick ", 6) == 0) {
            if (have) {
                char host[PATH_MAX + 64];
                snprintf(host, sizeof(host), "%s", brick);
                char *colon = strchr(host, ':');
                if (colon)
                    *colon = 0;
                fprintf(out, "\nCrawl statistics for brick no %d\nHostname of brick %s\n\n", no,
                        host);
                print_time(out, "Starting", val[0]);
                print_time(out, "Ending", val[1]);
                fprintf(out,
                        "Type of crawl: INDEX\nNo. of entries healed: %lld\n"
                        "No. of entries in split-brain: %lld\nNo. of heal failed entries: %lld\n"
                        "No. of entries pending: %lld\nNo. of bytes copied: %lld\n"
                        "No. of bytes found equal (range heal): %lld\n\n",
                        val[2], val[3], val[4], val[12], val[5], val[6]);
                fprintf(out,
                        "Totals since the self-heal daemon started (%lld crawls): entries healed "
                        "%lld, split-brain entries resolved %lld, bytes copied %lld, bytes found "
                        "equal %lld\n",
                        val[7], val[8], val[11], val[9], val[10]);
            }
            if (!got)
                break;
            memset(val, 0, sizeof(val));
            have = sscanf(line, "brick %d %4150s", &no, brick) == 2; /* brick: PATH_MAX + 64 */
            continue;
        }
        char key[32];
        long long x;
        if (sscanf(line, "%31s %lld", key, &x) != 2)
            continue;
        for (int i = 0; keys[i]; i++)
            if (strcmp(key, keys[i]) == 0)
                val[i] = x;
    }
    fclose(f);
    return 0;
}

int mgmt_cmd_heal(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 4)
        return 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "Volume %s does not exist\nVolume heal failed.\n", argv[2]);
        return 1;
    }
    if (v->replica < 2) {
        fprintf(out, "Volume %s is not of type replicate\nVolume heal failed.\n", v->name);
        return 1;
    }
    if (strcmp(argv[3], "enable") == 0 || strcmp(argv[3], "disable") == 0)
        return set_shd(m, v, argv[3][0] == 'e', out);
    if (strcmp(argv[3], "statistics") == 0) {
        if (v->status != MGMT_VOL_STARTED) {
            fprintf(out, "Volume %s is not started.\n", v->name);
            return 1;
        }
        return statistics(m, v, out);
    }
    return 2;
}
