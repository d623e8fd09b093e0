/* nobubble report: one self-contained HTML page (inline SVG charts and tables) from a sweep's
 * folder or one run's. See docs/experiments.md. */
#include <stdio.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/positional.h"
#include "nobubble/common.h"
#include "report/report.h"

static const char usage[] =
    "usage: nobubble report DIR [--out FILE]\n"
    "Writes DIR/report.html (or FILE) from DIR/results.csv and the runs' metrics.jsonl and summary.json:\n"
    "validation-loss curves, the gap to synchronous training with error feedback's recovery, loss against\n"
    "training time, and a table of every run. DIR may also be one run's folder (train --out: summary.json\n"
    "and metrics.jsonl): its results, its training and validation loss, and its summary.\n"
    "No scripts, no network: open it in any browser.";

int cmd_report(int argc, char **argv) {
    const char *out = NULL, *dir = NULL;
    const cli_option opts[] = {
        {"--out", OPT_STR, &out, "FILE   where to write the page (DIR/report.html)"},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    argc = cli_take_positional(argc, argv, opts, n_opts, &dir);
    if (argc < 0) return 2;
    int rc = cli_parse(usage, argc, argv, opts, n_opts);
    if (rc) return rc > 0 ? 0 : 2;
    if (!dir) {
        fprintf(stderr, "nobubble report: DIR is required (usage: nobubble report DIR [--out FILE])\n");
        return 2;
    }
    char path[4200];
    if (!out) {
        snprintf(path, sizeof path, "%s/report.html", dir);
        out = path;
    }
    if (nb_report_write(dir, out)) {
        fprintf(stderr, "nobubble report: %s\n", nb_last_error());
        return 1;
    }
    printf("wrote %s\n", out);
    return 0;
}
