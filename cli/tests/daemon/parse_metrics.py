"""Parses a Prometheus text exposition (format 0.0.4) with the real parser of Debian's
python3-prometheus-client and prints it as JSON: a list of families, each
{"name", "type", "help", "samples": [{"name", "labels", "value"}]}, in the order read.

Usage: python3 parse_metrics.py FILE   (FILE "-" reads stdin)

The parser is lax (a sample it cannot place becomes an untyped family of its own), so this
also refuses what Prometheus itself would: an untyped family, a family that appears twice,
a sample without HELP and TYPE before it. Exit 0 with the JSON; 1 with the reason on stderr.
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    path = sys.argv[1]
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    families = []
    seen = set()
    for fam in text_string_to_metric_families(text):
        if fam.type == "untyped":
            sys.exit("sample without HELP/TYPE of its own family: %r" % (fam.samples,))
        if fam.name in seen:
            sys.exit("family %s appears twice" % fam.name)
        seen.add(fam.name)
        samples = []
        for s in fam.samples:
            value = s.value
            if math.isinf(value):
                value = "+Inf" if value > 0 else "-Inf"
            samples.append({"name": s.name, "labels": s.labels, "value": value})
        families.append({"name": fam.name, "type": fam.type,
                         "help": fam.documentation, "samples": samples})
    json.dump(families, sys.stdout)


if __name__ == "__main__":
    main()
